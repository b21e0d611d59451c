//! An undecided pass (of a key with shape classes, see `registry::classes`) finds its
//! class: its main context's first requests make its signature ([`note_request`]), at
//! whatever op-scope depth they are made; the class of that signature (made when new,
//! within the key's bound) then profiles or replays the rest of the pass as its own
//! (`start::choose_for`), starting with the op scopes the context has open at the
//! decision (`scopes::enter_open`), so that its profile and its replays name the same
//! scope nodes. Until then the pass runs on the backend, counted: in a replay its
//! requests before the decision count as misses without a slab. A pass that others can
//! reach at the decision (a handle, a helper context), or deeper in op scopes than its
//! context keeps names of (`context::NAMED_DEPTH`), stays on the backend.

use crate::config::{self, Config};
use crate::pass::context::Context;
use crate::pass::enter::path_of;
use crate::pass::scopes::enter_open;
use crate::pass::start::choose_for;
use crate::pass::state::{PassKind, PassState};
use crate::registry::{self, KeyEntry, Signature};
use crate::replay::replayer::Replayer;
use crate::support::thread;

/// An undecided pass's main context is about to serve a request of `size` bytes aligned
/// to `align` (on the backend); once the signature is complete the pass is decided. With
/// the re-entrancy guard set.
pub(crate) fn note_request(ctx: &mut Context, size: u64, align: u64) {
    let cfg = config::config();
    ctx.signature.note(size, align, cfg.lanes);
    let lead = ctx.pass().entry.map_or(0, |e| e.classes.lead());
    if ctx.signature.complete(lead) {
        decide(ctx, cfg);
    }
}

/// A profiled context serves a request of `size` bytes aligned to `align`: it goes toward
/// the context's signature, which its plan keeps (see `registry::classes`).
pub(crate) fn note_profiled(signature: &mut Signature, size: u64, align: u64) {
    signature.note(size, align, config::config().lanes);
}

/// Decides the pass of `ctx` (its main context) by its signature. A pass that others can
/// reach (a handle, a helper), or too deep in op scopes, stays on the backend.
fn decide(ctx: &mut Context, cfg: &Config) {
    let pass = ctx.pass();
    if !pass.undecided || ctx.helper.is_some() || ctx.abandoned.is_some() {
        return;
    }
    let alone = pass.alone();
    // Its class enters the open scopes by name: deeper than the names kept, it cannot.
    let named = ctx.names_kept();
    let Some(own) = pass.entry else { return };
    let class = class_of(own, ctx, cfg);
    let p = ctx.pass.cast_mut();
    // SAFETY: `ctx.pass` is the owner's pointer to the pass (`start::make`), which this
    // thread owns and runs; with no handle and no helper context (`alone`, and none can
    // be made meanwhile: only this thread could) nobody else reads it, and no reference
    // to it is held across this write.
    let state: &mut PassState = unsafe { &mut *p };
    state.undecided = false;
    if !alone || !named {
        return; // stays on the backend, counted
    }
    if !std::ptr::eq(class, own) {
        class.touch();
    }
    state.entry = Some(class);
    ctx.recorder = choose_for(class, cfg, state);
    if state.kind == PassKind::Replay {
        // SAFETY: a replayed bound pass holds its instance (or none), with its blocks,
        // and is registered with its plan until it is finished.
        ctx.replay = unsafe { Replayer::new(state.inst(), state.plan) };
    }
    enter_open(ctx);
    let path = path_of(ctx);
    thread::with(|s| thread::set_path(s, path), ());
}

/// The class of the context's signature: the key's own or one of its classes when the
/// signature is theirs (a match, see `Classes::note_match`) or within the close ratio of
/// theirs, a new one within the bound, or past it the nearest. A key with `max_classes`
/// classes already takes no lock.
fn class_of(own: &'static KeyEntry, ctx: &Context, cfg: &Config) -> &'static KeyEntry {
    let s = &ctx.signature;
    if let Some(c) = own.find_class(s) {
        c.classes.note_match();
        return c;
    }
    own.close_class(s)
        .or_else(|| {
            (own.class_count() < cfg.max_classes)
                .then(|| registry::class_entry(own, s, cfg.max_classes))
                .flatten()
        })
        .unwrap_or_else(|| own.nearest_class(s))
}
