//! How a pass ends: the owner [`end`]s it; when the last holder of its resources leaves,
//! the pass is [`finish`]ed: its profile (the main context's recording and the helpers')
//! goes to the planner, its replay gives its slab instance back and adds its counters. A
//! pass cut short (a panic, a thread exit, a failed or unbounded profile) is *abandoned*:
//! its profile is not planned and its replay counts toward no re-profiling.

use crate::config;
use crate::memory::release;
use crate::pass::context::Context;
use crate::pass::fork;
use crate::pass::state::{PassKind, PassState};
use crate::plan::job::{Job, Pinned};
use crate::plan::worker;
use crate::profiling::recorder::Recorder;
use crate::registry::reclaim::RECLAIMER;
use crate::registry::{self, close, KeyEntry, KeyState, Signature};
use crate::replay::slab::instance::lends_pending;
use crate::replay::slab::pool::{Lend, Released};
use crate::stats::{self, AbandonReason, MissReason, PassCounters, GLOBAL};
use crate::support::sync::Ordering;

/// The owner ends the pass (with the re-entrancy guard set; its main context checked
/// in). `abandon`: it is cut short (a panic, a thread exit, a cancelled future).
pub(crate) fn end(pass: *const PassState, abandon: Option<AbandonReason>) {
    // SAFETY: the owner's reference keeps the pass until released below.
    let p = unsafe { &*pass };
    if let Some(reason) = abandon {
        p.note_abandoned(reason);
    }
    p.mark_ended();
    leave_resources(p);
    if p.release() {
        // SAFETY: the last reference.
        drop(unsafe { Box::from_raw(pass.cast_mut()) });
    }
}

/// A holder of the pass's resources is done; the last one finishes the pass.
pub(super) fn leave_resources(p: &PassState) {
    if p.deactivate() {
        finish(p);
    }
}

/// Finishes a pass whose resources nobody holds any more: every context left (the main
/// one is checked in), every helper's counts and recording handed in.
pub(super) fn finish(p: &PassState) {
    let main = p.check_out_main().cast::<Context>();
    // SAFETY: checked in by everyone who entered it; owned by the pass.
    let mut main = (!main.is_null()).then(|| unsafe { Box::from_raw(main) });
    let mut counters = p.helper_counters();
    let mut recorder = None;
    let mut signature = Signature::default();
    let mut replayed = Signature::default();
    let mut abandon = p.abandoned().map(|i| AbandonReason::ALL[i]);
    if let Some(m) = main.as_mut() {
        m.replay.flush_freed(); // before the instance goes back to its pool
        let mc = m.counters;
        if p.kind == PassKind::Replay {
            // Counted on the backend: allocations made while the context had no slab
            // memory (none could be had, see `supply`).
            counters.allocations += mc.slab_hits + mc.missed() + mc.allocations;
            counters.misses[MissReason::NoSlab as usize] += mc.allocations;
        } else {
            counters.allocations += mc.allocations;
        }
        counters.slab_hits += mc.slab_hits;
        counters.slab_bytes += mc.slab_bytes;
        counters.diverged_bytes += mc.diverged_bytes;
        counters.skipped += mc.skipped;
        for (a, b) in counters.misses.iter_mut().zip(mc.misses) {
            *a += b;
        }
        abandon = m.abandoned.or(abandon);
        recorder = m.recorder.take();
        signature = m.signature;
        replayed = m.replay.signature;
    }
    // The key whose first plan this pass's profile was submitted for.
    let mut first_plan = None;
    match p.kind {
        PassKind::Profile => {
            first_plan = finish_profile(p, recorder, abandon, &counters, signature);
        }
        PassKind::Replay => finish_replay(p, &mut counters, &replayed, abandon),
        PassKind::Backend => {
            // Mode `off` (or a disabled child) counts its passes, not their allocations.
            stats::add(&GLOBAL.passes_backend, 1);
            stats::add(&GLOBAL.backend_pass_allocations, counters.allocations);
            if let Some(e) = p.entry {
                stats::add(&e.counters.passes_backend, 1);
                // Its key's plan was published while it ran (a backend pass starts only
                // without one): what it freed is of no more use to the key's passes.
                if e.has_plan() {
                    release::flush_thread_cache();
                    worker::trim_later();
                }
            }
        }
    }
    drop(main);
    if p.kind == PassKind::Profile {
        // What the pass freed on the backend waits in this thread's cache, where the
        // purge after its plan cannot return it (with inline planning, the plan's trim
        // flushed it already).
        release::flush_thread_cache();
        // The planner may have published the plan and purged before the flush: then the
        // flushed blocks' pages wait for another purge. Published after this check, the
        // plan's own purge comes after the flush (both take the arenas' locks).
        if first_plan.is_some_and(KeyEntry::has_plan) {
            worker::trim_later();
        }
    }
    // A child forked in the middle of the setup (its passes on the backend) leaves the
    // plans it was copied with alone: the thread that was changing them is not in it.
    if !fork::disabled() {
        RECLAIMER.reclaim();
    }
}

/// Hands a profiled pass's profile to the planner (or gives it up); returns its key when
/// the profile was submitted for the key's first plan.
fn finish_profile(
    p: &PassState,
    recorder: Option<Recorder>,
    abandon: Option<AbandonReason>,
    counters: &PassCounters,
    signature: Signature,
) -> Option<&'static KeyEntry> {
    stats::add(&GLOBAL.passes_profiled, 1);
    stats::add(&GLOBAL.profiled_allocations, counters.allocations);
    let entry = p.entry;
    // This pass's number among the key's profiled passes (names its trace files): taken
    // from the increment itself, so concurrent profiles get distinct numbers.
    let serial = entry.map(|e| e.counters.passes_profiled.fetch_add(1, Ordering::Relaxed) + 1);
    let fragments = p.take_fragments();
    let profile = match (recorder, abandon, fragments) {
        (Some(rec), None, Some(fragments)) => rec.finish().and_then(|mut profile| {
            for f in fragments {
                let part = f.recorder.finish()?;
                profile
                    .adopt_helper(f.helper, part)
                    .map_err(|_| AbandonReason::OutOfMemory)?;
            }
            Ok(profile)
        }),
        (_, Some(reason), _) => Err(reason),
        (_, None, None) => Err(AbandonReason::OutOfMemory),
        (None, None, _) => Err(AbandonReason::OutOfMemory), // not reached: see `choose`
    };
    let profile = match profile {
        Ok(profile) => profile,
        Err(reason) => {
            abandon_profile(entry, reason);
            return None;
        }
    };
    // A re-profile of a new shape founds a class; else it is merged with its entry's
    // previous plan, held for that.
    let (entry, founded, retag) = match entry.map(|e| (e, shape_of(e, &signature))) {
        Some((_, Reprofile::Founds(class))) => (Some(class), true, false),
        Some((e, Reprofile::Merges { retag })) => (Some(e), false, retag),
        None => (None, false, false),
    };
    let base = entry.filter(|_| !founded).and_then(Pinned::current);
    let job = Job {
        profile,
        entry,
        serial,
        base,
        signature,
        retag,
    };
    let first_plan = entry.filter(|_| job.first_plan());
    if !worker::submit(job) {
        abandon_profile(entry, AbandonReason::PlannerBusy);
        return None;
    }
    first_plan
}

/// What a profile of entry `e` does with its shape (see `registry::classes`).
enum Reprofile {
    /// It becomes the first plan of a new class of the key.
    Founds(&'static KeyEntry),
    /// It merges into `e`'s plan; with `retag` its signature becomes `e`'s.
    Merges { retag: bool },
}

/// What a profile of signature `s` of entry `e` does: it founds a class when `e` is a key
/// without classes whose plan is of a plausibly new shape (its first size more than
/// `CLOSE_RATIO` from `s`'s) and matched by a pass since it was published; the profile
/// becomes the plan of the new class and the key's plan stays its first class's (the key
/// leaves `Profiling` for `Planned`). Else it merges into `e`'s plan, and takes over its
/// signature when that is of another shape no pass matched (a first pass's one-time
/// allocations, a class only reached as the nearest).
fn shape_of(e: &'static KeyEntry, s: &Signature) -> Reprofile {
    let c = &e.classes;
    let has_plan = matches!(e.state(), KeyState::Profiling(q) if !q.is_null());
    if !has_plan {
        return Reprofile::Merges { retag: true };
    }
    let lead = c.lead();
    let parts = c.parts_at(s);
    let alike = c.signature() == s.word(lead) || close(c.first(), s.first(lead));
    if c.signature() == 0 || (alike && parts.is_none()) {
        return Reprofile::Merges { retag: false };
    }
    if !c.matched() || c.is_class() || c.classed() {
        return Reprofile::Merges {
            retag: !c.matched(),
        };
    }
    if let Some(p) = parts.filter(|_| alike) {
        c.set_lead(p); // the shapes part past the lead: the signature is taken there
    }
    match registry::class_entry(e, s, config::config().max_classes) {
        Some(class) if !std::ptr::eq(class, e) && class.begin_profile() => {
            e.abandon_profile();
            Reprofile::Founds(class)
        }
        _ => Reprofile::Merges { retag: false },
    }
}

/// A profile given up: counted, the key back to its previous state, and after a failure
/// that would recur (memory, bounds) no new profile of the key for a while.
fn abandon_profile(entry: Option<&'static KeyEntry>, reason: AbandonReason) {
    stats::add(&GLOBAL.profiles_abandoned[reason as usize], 1);
    let Some(e) = entry else { return };
    stats::add(&e.counters.profiles_abandoned, 1);
    e.abandon_profile();
    if matches!(reason, AbandonReason::OutOfMemory | AbandonReason::Bound) {
        e.back_off();
    }
}

/// A replayed pass ends: its counters are added, and its divergence and shape noted for
/// its key (`signature`: its first requests above the lane bound); it gives its
/// instance back.
fn finish_replay(
    p: &PassState,
    counters: &mut PassCounters,
    signature: &Signature,
    abandon: Option<AbandonReason>,
) {
    stats::add(&GLOBAL.passes_replayed, 1);
    GLOBAL.add_replay(counters);
    if let Some(e) = p.entry {
        e.count_replay(counters);
        if abandon.is_some() {
            // Unwinding or exiting: what it allocated says nothing about the profile.
            stats::add(&GLOBAL.replays_abandoned, 1);
            stats::add(&e.counters.replays_abandoned, 1);
        } else if !p.slabs.is_null() {
            // Before the plan is released: once it is, it may be freed and a new plan of
            // the key allocated at its address, which this pass's counts must not reach.
            let cfg = config::config();
            let (ratio, classes) = (cfg.replan_miss_ratio, cfg.max_classes);
            if !e.note_replay_shape(p.slabs, counters, signature, ratio, classes) {
                e.note_replayed(p.slabs, counters, cfg.miss_window, ratio);
            }
        }
    }
    if !p.slabs.is_null() {
        // SAFETY: the pass registered with `slabs` at start; it stays alive until released
        // here, and every context left.
        // A pass of a key with shape classes gives its slots' block to the key's next
        // pass, of whichever class.
        let classes = p.entry.is_some_and(KeyEntry::has_shape_classes);
        let lend = Lend::for_pass(p.bound, classes);
        let released = unsafe { (*p.slabs).release(p.inst(), abandon.is_some(), lend) };
        note_released(&released);
        if !p.bound && lends_pending() {
            registry::lend_idle_blocks();
        }
    }
}

fn note_released(r: &Released) {
    stats::add(&GLOBAL.slots_demoted, r.demoted);
    stats::add(&GLOBAL.pages_returned_bytes, r.pages_returned);
}
