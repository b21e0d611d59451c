//! The scope nodes of a context's op scopes: the node an op entered under a parent gets
//! ([`enter_node`]: the recorder's new node in a profile, the plan's next occurrence of
//! the op in a replay, else `UNKNOWN`), and the nodes of the scopes an undecided pass had
//! open when its class was decided ([`enter_open`]).

use crate::pass::context::{Context, UNKNOWN};
use crate::pass::enter::abandon_running;
use crate::pass::state::PassKind;
use crate::replay::state::Cursor;
use crate::support::prefetch::prefetch;
use crate::support::thread;

/// The scope node of op `name` entered under node `parent` of the context.
pub(crate) fn enter_node(ctx: &mut Context, parent: u32, name: &'static str) -> u32 {
    if ctx.recorder.is_some() {
        return thread::with_bookkeeping(|| {
            match ctx.recorder.as_mut().map(|r| r.enter_scope(parent, name)) {
                Some(Ok(node)) => node,
                Some(Err(reason)) => {
                    abandon_running(ctx, reason);
                    UNKNOWN
                }
                None => UNKNOWN,
            }
        });
    }
    if ctx.pass().kind != PassKind::Replay || !ctx.replay.has_slab() || parent == UNKNOWN {
        return UNKNOWN;
    }
    // SAFETY: a replayed pass holds its plan and instance until it is finished.
    let (plan, inst) = unsafe { (&*ctx.replay.plan, &*ctx.replay.inst) };
    let Some((base, count)) = plan.scope_group(parent, name) else {
        return UNKNOWN;
    };
    // SAFETY: the occurrences of a context's scopes are written only by the thread in it
    // (one thread per context: see `Instance::claim_node`).
    let k = unsafe {
        inst.occurrences.with_mut(|occ| {
            let o = &mut occ[base as usize];
            let k = *o;
            *o += 1;
            k
        })
    };
    if k >= count {
        return UNKNOWN;
    }
    let node = base + k;
    // What the next ops will look up, into the cache while this one runs (see `Ahead`).
    // SAFETY: the cursors and occurrences are written only by the thread in the context
    // (as above), and only read here.
    unsafe {
        inst.cursors.with_mut(|cursors| {
            if let Some(&Cursor { ahead, .. }) = cursors.get(node as usize) {
                plan.prefetch_ahead(&ahead);
                prefetch(cursors, ahead.node);
                inst.occurrences.with_mut(|occ| prefetch(occ, ahead.base));
            }
        })
    };
    node
}

/// A context whose pass was just decided (its recorder or replayer set, nothing of it
/// recorded or matched yet) enters the op scopes it has open, outermost first, as if
/// they were entered now: its profile records them as the pass's first scopes, and its
/// replay finds each as the first occurrence of its op under its parent, as that profile
/// made it. Scopes closed before the decision are in neither. Scopes past the stack's
/// depth stay with their stored ancestor, as always.
pub(crate) fn enter_open(ctx: &mut Context) {
    let mut depth = 0;
    while let Some(name) = ctx.name_at(depth) {
        let parent = match depth {
            0 => ctx.root,
            d => ctx.node_at(d - 1),
        };
        let node = enter_node(ctx, parent, name);
        ctx.set_node_at(depth, node);
        depth += 1;
    }
}
