//! A thread's view of a running pass: what its allocations need on the hot path, its
//! counters, its op-scope stack and its recorder. The pass as a whole, shared by the
//! contexts entered on several threads, is `state.rs`; how contexts are entered and left
//! is `enter.rs`.
//!
//! A pass has one *main* context (the thread that runs `pass()`, or the task a future
//! wrapper polls) and any number of *helper* contexts (`PassHandle::enter(id)` on any
//! thread). Each context is its own sequence of allocations in the profile and the plan:
//! the main one under the pass's root scope, a helper under a scope `@<id>` of the root.
//! A thread's contexts form a stack (`prev`): entering pushes, leaving pops.

use std::alloc::{dealloc, Layout};
use std::cell::Cell;
use std::ptr;

use crate::memory::own_blocks::Spares;
use crate::pass::state::{PassKind, PassState};
use crate::profiling::recorder::Recorder;
use crate::registry::Signature;
use crate::replay::replayer::{ReplayContext, Replayer};
use crate::stats::{AbandonReason, PassCounters};
use crate::support::fallible::try_box;
use crate::support::sync::{plain, Ordering};
use crate::support::thread;

/// Scope node of allocations under an op the plan does not know.
pub(crate) const UNKNOWN: u32 = u32::MAX;

/// The serial number of the next context.
static SERIAL: plain::AtomicU64 = plain::AtomicU64::new(1);

/// Deepest op-scope nesting tracked; deeper scopes are attributed to their ancestor at
/// this depth, identically in profiling and replay.
pub(crate) const MAX_DEPTH: usize = 64;

/// Open scopes whose op names a context keeps (see `Context::name_at`): an undecided pass
/// deeper than this at its decision stays on the backend. Small, as a context is copied
/// whole when a pass starts.
pub(crate) const NAMED_DEPTH: usize = 16;

/// One thread's context of a pass (boxed; the thread state points to the current one).
/// Fields the allocation path reads come first.
pub(crate) struct Context {
    /// The replay of the pass in this context: its slab instance (null outside replay, or
    /// when none could be had) and its matching's state.
    pub(crate) replay: Replayer,
    /// The innermost scope node (the top of the op stack, `root` outside ops), kept here
    /// so the allocation path reads it without touching the stack.
    pub(crate) node: u32,
    pub(crate) counters: PassCounters,
    /// Identity: unique in the process, so a guard can tell its context from a later one.
    pub(crate) serial: u64,
    /// The pass this is a context of.
    pub(crate) pass: *const PassState,
    /// The thread's current context before this one was entered (null: none).
    pub(crate) prev: *mut Context,
    /// The node this context's scopes hang from: the plan's (replay), the recorder's own
    /// root (profile), or `UNKNOWN` (a helper the plan does not know).
    pub(crate) root: u32,
    /// A helper context's id; `None` for the main context.
    pub(crate) helper: Option<u32>,
    pub(crate) recorder: Option<Recorder>,
    /// Freed large blocks of a profiled context (see `own_blocks`).
    pub(crate) spares: Spares,
    /// The context was cut short (profile abandoned, thread unwinding).
    pub(crate) abandoned: Option<AbandonReason>,
    /// The signature of the context's first requests (profiled or undecided passes; see
    /// `registry::Signature`).
    pub(crate) signature: Signature,
    /// The op-scope stack: scope node ids (the context's root is not on it).
    stack: [u32; MAX_DEPTH],
    /// The op names of the first [`NAMED_DEPTH`] scopes on `stack`, slot for slot: an
    /// undecided pass's class enters the scopes open at its decision (see
    /// `scopes::enter_open`).
    names: [&'static str; NAMED_DEPTH],
    /// Entries in `stack` (may exceed `MAX_DEPTH`: the excess is not stored).
    depth: u32,
}

impl Context {
    /// A context of `pass`, at `root`, taking the pass's slab and plan; a new serial
    /// number names it.
    pub(crate) fn new(pass: &PassState, root: u32, helper: Option<u32>) -> Context {
        let inst = match pass.kind {
            PassKind::Replay => pass.inst(),
            _ => std::ptr::null_mut(),
        };
        Context {
            // SAFETY: a replayed pass holds its instance, with its blocks, until it is
            // finished.
            replay: unsafe { Replayer::new(inst, pass.plan) },
            node: root,
            counters: PassCounters::default(),
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            pass,
            prev: std::ptr::null_mut(),
            root,
            helper,
            recorder: None,
            spares: Spares::new(),
            abandoned: None,
            signature: Signature::default(),
            stack: [0; MAX_DEPTH],
            names: [""; NAMED_DEPTH],
            depth: 0,
        }
    }

    /// The pass.
    pub(crate) fn pass(&self) -> &PassState {
        // SAFETY: a context holds a reference on its pass (see `PassState::refs`).
        unsafe { &*self.pass }
    }

    /// The op-stack depth.
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// The innermost scope node, or the context's root outside any op.
    pub(crate) fn top(&self) -> u32 {
        match self.depth as usize {
            0 => self.root,
            d => self.stack[d.min(MAX_DEPTH) - 1],
        }
    }

    /// The node entered at stack position `depth`, if stored.
    pub(crate) fn node_at(&self, depth: u32) -> u32 {
        self.stack.get(depth as usize).copied().unwrap_or(UNKNOWN)
    }

    /// Pushes scope `node` of op `name` (not stored past [`MAX_DEPTH`], its name not past
    /// [`NAMED_DEPTH`]).
    pub(crate) fn push_scope(&mut self, node: u32, name: &'static str) {
        let d = self.depth as usize;
        if let Some(s) = self.stack.get_mut(d) {
            *s = node;
            self.node = node;
        }
        if let Some(n) = self.names.get_mut(d) {
            *n = name;
        }
        self.depth += 1;
    }

    /// Whether the op names of all open scopes are kept (see [`NAMED_DEPTH`]).
    pub(crate) fn names_kept(&self) -> bool {
        self.depth as usize <= NAMED_DEPTH
    }

    /// The op name of the scope at stack position `depth`, if stored.
    pub(crate) fn name_at(&self, depth: u32) -> Option<&'static str> {
        (depth < self.depth).then(|| self.names.get(depth as usize).copied())?
    }

    /// Sets the node of the stored scope at stack position `depth` (below the depth), and
    /// the innermost node with it.
    pub(crate) fn set_node_at(&mut self, depth: u32, node: u32) {
        if depth < self.depth {
            if let Some(s) = self.stack.get_mut(depth as usize) {
                *s = node;
            }
            self.node = self.top();
        }
    }

    /// Pops scopes down to `depth` (an op guard's entry depth: scopes it left open go too).
    pub(crate) fn pop_to(&mut self, depth: u32) {
        self.depth = self.depth.min(depth);
        self.node = self.top();
    }
}

impl ReplayContext for Context {
    #[inline(always)]
    fn replayer(&mut self) -> &mut Replayer {
        &mut self.replay
    }

    #[inline(always)]
    fn node(&self) -> u32 {
        self.node
    }

    #[inline(always)]
    fn counters(&mut self) -> &mut PassCounters {
        &mut self.counters
    }
}

/// This thread's current context, or null.
#[inline(always)]
pub(crate) fn current() -> *mut Context {
    thread::context().cast()
}

thread_local! {
    /// The memory of this thread's last helper context, kept for its next one: a thread
    /// that enters helper contexts op after op (a pool worker) allocates for the first
    /// only. Uninitialised when not null; freed by [`free_spare`] at thread exit.
    static SPARE: Cell<*mut Context> = const { Cell::new(ptr::null_mut()) };
}

/// Boxes `ctx` in this thread's spare memory if it has one, else in a new allocation;
/// `None` when memory runs out. Runs with the re-entrancy guard set.
pub(crate) fn boxed(ctx: Context) -> Option<*mut Context> {
    let spare = SPARE
        .try_with(|s| s.replace(ptr::null_mut()))
        .unwrap_or(ptr::null_mut());
    if spare.is_null() {
        return try_box(ctx).map(Box::into_raw);
    }
    // SAFETY: a spare is the uninitialised memory of a `Box<Context>` this thread owns
    // (see `unboxed`); writing initialises it without dropping anything.
    unsafe { spare.write(ctx) };
    Some(spare)
}

/// Drops the context `ctx` (made by [`boxed`]) and, when `keep` (the thread will free its
/// spare at exit), keeps its memory as this thread's spare if it has none. Runs with the
/// re-entrancy guard set.
///
/// # Safety
/// `ctx` came from [`boxed`] and is referenced nowhere any more.
pub(crate) unsafe fn unboxed(ctx: *mut Context, keep: bool) {
    // SAFETY: the caller passes the only reference to a live boxed context.
    unsafe { ptr::drop_in_place(ctx) };
    let kept = keep
        && SPARE
            .try_with(|s| {
                let empty = s.get().is_null();
                if empty {
                    s.set(ctx);
                }
                empty
            })
            .unwrap_or(false);
    if !kept {
        // SAFETY: the memory of a `Box<Context>`, its contents dropped above.
        unsafe { dealloc(ctx.cast(), Layout::new::<Context>()) };
    }
}

/// Frees this thread's spare (at thread exit, with the re-entrancy guard set).
pub(crate) fn free_spare() {
    let spare = SPARE
        .try_with(|s| s.replace(ptr::null_mut()))
        .unwrap_or(ptr::null_mut());
    if !spare.is_null() {
        // SAFETY: a spare is the memory of a `Box<Context>` whose contents were dropped.
        unsafe { dealloc(spare.cast(), Layout::new::<Context>()) };
    }
}
