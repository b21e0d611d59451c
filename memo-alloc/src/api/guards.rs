//! The public guards: [`pass`], [`op`] and [`observe`].

use std::marker::PhantomData;

use crate::format::trace::ScopeKind;
use crate::observe::{self as observe_program, ScopeMark};
use crate::pass::context::{Context, MAX_DEPTH, UNKNOWN};
use crate::pass::scopes::enter_node;
use crate::pass::{abandon_running, end, leave, start, PassState};
use crate::stats::AbandonReason;
use crate::support::thread;

/// Whether a whole-program recording runs (its scopes are then recorded too).
fn recording() -> bool {
    observe_program::state::recording()
}

/// Ends the pass when dropped (**contract**). Not `Send`: a pass belongs to its thread
/// (see [`crate::Pass`] for one that moves, and [`crate::current`] to carry it to helper
/// threads).
///
/// Guards may be dropped in any order: each ends its own pass (or scope), identified by
/// its serial number, and does nothing if that pass has ended already.
#[must_use = "the pass ends when this guard is dropped"]
pub struct PassGuard {
    kind: GuardKind,
    /// The pass as a scope of a whole-program recording, when one runs.
    recorded: Option<ScopeMark>,
    _not_send: PhantomData<*mut ()>,
}

enum GuardKind {
    /// A pass of its own, and its main context on this thread.
    Pass { pass: *const PassState, main: u64 },
    /// A `pass()` inside a pass: a scope of it, ended when the guard drops.
    Scope { _op: OpGuard },
    /// No pass could be started (no memory): the guard does nothing.
    Nothing,
}

/// Ends the op scope when dropped (**contract**). Not `Send`.
#[must_use = "the scope ends when this guard is dropped"]
pub struct OpGuard {
    /// The context the scope belongs to (0: none, outside passes).
    context: u64,
    /// Stack depth before the scope was entered.
    depth: u32,
    /// The op as a scope of a whole-program recording, when one runs.
    recorded: Option<ScopeMark>,
    _not_send: PhantomData<*mut ()>,
}

/// Starts a pass of `key`: the first pass of a key is profiled, later ones are replayed
/// from a slab. A pass inside a pass (or inside a helper context of one) is an inner scope
/// named `key`. Keys may be made at run time (a model name, a shape bucket): they are
/// copied once into the plan registry, which holds at most 4,096 keys; the plans kept are
/// bounded by `Config::max_plans`.
///
/// ```
/// let _pass = memo_alloc::pass("model");
/// let v: Vec<u8> = vec![0; 1024]; // recorded, or served from the slab
/// drop(v);
///
/// let seq = 300;
/// let key = format!("bert/seq<={}", memo_alloc::Buckets::powers_of_two().bucket(seq));
/// let _p = memo_alloc::pass(&key); // a run-time key (here an inner scope of "model")
/// ```
pub fn pass(key: &str) -> PassGuard {
    let nested = !crate::pass::context::current().is_null();
    let recorded = (recording() && !nested)
        .then(|| {
            let name = thread::with_bookkeeping(|| interned(key));
            observe_program::enter_scope(name, ScopeKind::Pass)
        })
        .flatten();
    let kind = if nested {
        let name = thread::with_bookkeeping(|| interned(key));
        GuardKind::Scope { _op: op(name) }
    } else {
        match thread::with_bookkeeping(|| start(key)) {
            Some((pass, main)) => GuardKind::Pass { pass, main },
            None => GuardKind::Nothing,
        }
    };
    PassGuard {
        kind,
        recorded,
        _not_send: PhantomData,
    }
}

/// `key` as a `'static` string: the plan registry's copy (entries are never freed).
fn interned(key: &str) -> &'static str {
    crate::registry::entry(key).map_or("?", |e| &e.key)
}

impl Drop for PassGuard {
    fn drop(&mut self) {
        if let GuardKind::Pass { pass, main } = self.kind {
            let abandon = std::thread::panicking().then_some(AbandonReason::Panic);
            thread::with_bookkeeping(|| {
                leave(main);
                end(pass, abandon);
            });
        }
        // A scope ends when its `OpGuard` field drops, right after this.
        if let Some(mark) = self.recorded.take() {
            observe_program::exit_scope(mark);
        }
    }
}

/// This thread's current context, if `serial` names it (or any, for `None`).
///
/// # Safety
/// The returned reference must not outlive the context: use it within the caller's
/// call, on this thread, without leaving the context.
unsafe fn current<'a>(serial: Option<u64>) -> Option<&'a mut Context> {
    let p = crate::pass::context::current();
    // SAFETY: a non-null pointer is this thread's current context, owned by this thread
    // while entered.
    let ctx = unsafe { p.as_mut()? };
    serial.is_none_or(|s| s == ctx.serial).then_some(ctx)
}

/// Enters op scope `name` inside the running pass; outside a pass it does nothing.
///
/// Allocations are keyed by their innermost scope and their ordinal in it, so sibling ops
/// that run in another order than when profiled still find their slots.
pub fn op(name: &'static str) -> OpGuard {
    let recorded = if recording() {
        observe_program::enter_scope(name, ScopeKind::Op)
    } else {
        None
    };
    // SAFETY: used within this call.
    let Some(ctx) = (unsafe { current(None) }) else {
        return OpGuard {
            context: 0,
            depth: 0,
            recorded,
            _not_send: PhantomData,
        };
    };
    let depth = ctx.depth();
    if (depth as usize) < MAX_DEPTH {
        let parent = ctx.top();
        let node = enter_node(ctx, parent, name);
        ctx.push_scope(node, name);
    } else {
        ctx.push_scope(UNKNOWN, name); // not stored: its allocations stay with the ancestor
    }
    OpGuard {
        context: ctx.serial,
        depth,
        recorded,
        _not_send: PhantomData,
    }
}

impl Drop for OpGuard {
    fn drop(&mut self) {
        if let Some(mark) = self.recorded.take() {
            observe_program::exit_scope(mark);
        }
        if self.context == 0 {
            return;
        }
        // SAFETY: used within this call.
        let Some(ctx) = (unsafe { current(Some(self.context)) }) else {
            return; // its context was left first
        };
        // The node this guard entered (still in its stack slot: inner scopes used deeper
        // slots); none past the stack's capacity.
        let node = ctx.node_at(self.depth);
        ctx.pop_to(self.depth);
        if ctx.recorder.is_some() {
            thread::with_bookkeeping(|| {
                if let Some(Err(reason)) = ctx.recorder.as_mut().map(|r| r.exit_scope(node)) {
                    abandon_running(ctx, reason);
                }
            });
        }
    }
}

/// Resolves `ptr` (any pointer into a live allocation of the running profiled pass, such as
/// a view or a slice) to the allocation containing it and records the use. Returns that
/// allocation's index in the trace, or `None` outside a profiled pass or for unknown
/// pointers.
pub fn observe<T: ?Sized>(ptr: *const T) -> Option<u32> {
    let addr = ptr as *const u8 as usize;
    thread::with_bookkeeping(|| {
        // SAFETY: used within this call.
        let ctx = unsafe { current(None) }?;
        match ctx.recorder.as_mut()?.observe(addr) {
            Ok(found) => found,
            Err(reason) => {
                abandon_running(ctx, reason);
                None
            }
        }
    })
}
