//! The public guards: [`pass`], [`op`] and [`observe`].

use std::marker::PhantomData;

use crate::lifecycle;
use crate::pass::{Mode, Pass, MAX_DEPTH, UNKNOWN};
use crate::stats::AbandonReason;
use crate::tls;

/// Ends the pass when dropped (**contract**). Not `Send`: a pass belongs to its thread.
///
/// Guards may be dropped in any order: each ends its own pass (or scope), identified by
/// the pass's serial number, and does nothing if that pass has ended already.
#[must_use = "the pass ends when this guard is dropped"]
pub struct PassGuard {
    kind: GuardKind,
    _not_send: PhantomData<*mut ()>,
}

enum GuardKind {
    /// A pass of its own, by serial.
    Pass(u64),
    /// A `pass()` inside a pass: a scope of it, ended when the guard drops.
    Scope { _op: OpGuard },
    /// No pass could be started (no memory): the guard does nothing.
    Nothing,
}

/// Ends the op scope when dropped (**contract**). Not `Send`.
#[must_use = "the scope ends when this guard is dropped"]
pub struct OpGuard {
    /// The pass the scope belongs to (0: none, outside passes).
    serial: u64,
    /// Stack depth before the scope was entered.
    depth: u32,
    _not_send: PhantomData<*mut ()>,
}

/// Starts a pass of `key`: the first pass of a key is profiled, later ones are replayed
/// from a slab. A pass inside a pass is an inner scope named `key`.
///
/// ```
/// let _pass = memo_alloc::pass("model");
/// let v: Vec<u8> = vec![0; 1024]; // recorded, or served from the slab
/// drop(v);
/// ```
pub fn pass(key: &'static str) -> PassGuard {
    let kind = if !tls::pass().is_null() {
        GuardKind::Scope { _op: op(key) }
    } else {
        match tls::with_bookkeeping(|| lifecycle::start(key)) {
            Some(serial) => GuardKind::Pass(serial),
            None => GuardKind::Nothing,
        }
    };
    PassGuard {
        kind,
        _not_send: PhantomData,
    }
}

impl Drop for PassGuard {
    fn drop(&mut self) {
        if let GuardKind::Pass(serial) = self.kind {
            let abandon = std::thread::panicking().then_some(AbandonReason::Panic);
            tls::with_bookkeeping(|| lifecycle::end(serial, abandon));
        }
        // A scope ends when its `OpGuard` field drops, right after this.
    }
}

/// This thread's running pass, if `serial` names it (or any, for `None`).
///
/// # Safety
/// The returned reference must not outlive the pass: use it within the caller's call,
/// on this thread, without ending the pass.
unsafe fn running<'a>(serial: Option<u64>) -> Option<&'a mut Pass> {
    let p = tls::pass();
    // SAFETY: a non-null pass pointer is this thread's running pass, owned by lifecycle
    // and only touched by this thread.
    let pass = unsafe { p.as_mut()? };
    serial.is_none_or(|s| s == pass.serial).then_some(pass)
}

/// Enters op scope `name` inside the running pass; outside a pass it does nothing.
///
/// Allocations are keyed by their innermost scope and their ordinal in it, so sibling ops
/// that run in another order than when profiled still find their slots.
pub fn op(name: &'static str) -> OpGuard {
    // SAFETY: used within this call.
    let Some(pass) = (unsafe { running(None) }) else {
        return OpGuard {
            serial: 0,
            depth: 0,
            _not_send: PhantomData,
        };
    };
    let depth = pass.depth();
    if (depth as usize) < MAX_DEPTH {
        let node = enter_scope(pass, name);
        pass.push_scope(node);
    } else {
        pass.push_scope(UNKNOWN); // not stored: its allocations stay with the ancestor
    }
    OpGuard {
        serial: pass.serial,
        depth,
        _not_send: PhantomData,
    }
}

impl Drop for OpGuard {
    fn drop(&mut self) {
        if self.serial == 0 {
            return;
        }
        // SAFETY: used within this call.
        let Some(pass) = (unsafe { running(Some(self.serial)) }) else {
            return; // its pass ended first
        };
        // The node this guard entered (still in its stack slot: inner scopes used deeper
        // slots); none past the stack's capacity.
        let node = pass.node_at(self.depth);
        pass.pop_to(self.depth);
        if pass.recorder.is_some() {
            tls::with_bookkeeping(|| {
                if let Some(Err(reason)) = pass.recorder.as_mut().map(|r| r.exit_scope(node)) {
                    lifecycle::abandon_running(pass, reason);
                }
            });
        }
    }
}

/// The scope node of op `name` entered under the pass's innermost scope.
fn enter_scope(pass: &mut Pass, name: &'static str) -> u32 {
    let parent = pass.top();
    if pass.recorder.is_some() {
        return tls::with_bookkeeping(|| {
            match pass.recorder.as_mut().map(|r| r.enter_scope(parent, name)) {
                Some(Ok(node)) => node,
                Some(Err(reason)) => {
                    lifecycle::abandon_running(pass, reason);
                    UNKNOWN
                }
                None => UNKNOWN,
            }
        });
    }
    if pass.mode != Mode::Replay || pass.inst.is_null() || parent == UNKNOWN {
        return UNKNOWN;
    }
    // SAFETY: a replayed pass holds its plan and instance until it ends.
    let (plan, inst) = unsafe { (&*pass.plan, &*pass.inst) };
    let Some((base, count)) = plan.scope_group(parent, name) else {
        return UNKNOWN;
    };
    // SAFETY: the occurrences are written only by this thread, the instance's owner.
    let k = unsafe {
        inst.occurrences.with_mut(|occ| {
            let o = &mut occ[base as usize];
            let k = *o;
            *o += 1;
            k
        })
    };
    if k < count {
        base + k
    } else {
        UNKNOWN
    }
}

/// Resolves `ptr` (any pointer into a live allocation of the running profiled pass, such as
/// a view or a slice) to the allocation containing it and records the use. Returns that
/// allocation's index in the trace, or `None` outside a profiled pass or for unknown
/// pointers.
pub fn observe<T: ?Sized>(ptr: *const T) -> Option<u32> {
    let addr = ptr as *const u8 as usize;
    tls::with_bookkeeping(|| {
        // SAFETY: used within this call.
        let pass = unsafe { running(None) }?;
        match pass.recorder.as_mut()?.observe(addr) {
            Ok(found) => found,
            Err(reason) => {
                lifecycle::abandon_running(pass, reason);
                None
            }
        }
    })
}
