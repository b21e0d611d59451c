//! How a pass starts and ends.
//!
//! At start a pass is profiled, replayed or run on the backend ([`choose`]): the key's
//! state (see `registry`), admission to the plan cache, and a backoff after abandoned
//! profiles decide. At end ([`end`]) a profile is planned and published (`planning`), a
//! replay gives its slab instance back and adds its counters, and a pass cut short (a
//! panic, a thread exit, a failed or unbounded profile) is *abandoned*: its profile is not
//! planned and its replay counts toward no re-profiling.
//!
//! Passes are identified by a serial number, not by their position on a stack: whatever
//! order guards are dropped in, each ends its own pass or nothing.

use std::ptr;

use crate::cache;
use crate::config::{self, Config, Mode as ConfigMode};
use crate::fallible::try_box;
use crate::fork;
use crate::pass::{Mode, Pass};
use crate::planner;
use crate::planning::{Job, Pinned};
use crate::reclaim::RECLAIMER;
use crate::recorder::{Bounds, Recorder};
use crate::registry::{self, KeyEntry, KeyState};
use crate::slab::Released;
use crate::stats::{self, AbandonReason, MissReason, GLOBAL};
use crate::sync::{plain, Ordering};
use crate::tls::{self, Hot};

static SERIAL: plain::AtomicU64 = plain::AtomicU64::new(1);

thread_local! {
    /// Registered at a thread's first pass; its destructor ends a pass the thread left
    /// unfinished when it exited (a leaked guard), so the key is not stuck being profiled.
    static SENTINEL: Sentinel = const { Sentinel };
}

struct Sentinel;

impl Drop for Sentinel {
    fn drop(&mut self) {
        let p = tls::pass();
        if !p.is_null() {
            // SAFETY: this thread's running pass.
            let serial = unsafe { (*p).serial };
            tls::with_bookkeeping(|| end(serial, Some(AbandonReason::ThreadExit)));
        }
    }
}

/// The configuration, unless passes are off (mode `off`, or a child forked while the
/// allocator was being set up, which must not wait for that setup).
fn enabled_config() -> Option<&'static Config> {
    if fork::disabled() {
        return None;
    }
    Some(config::config()).filter(|c| c.mode != ConfigMode::Off)
}

/// Starts a pass of `key` on this thread, which runs none (with the re-entrancy guard
/// set). Returns the pass's serial number, or `None` when no memory was left for it (its
/// guard then does nothing).
pub(crate) fn start(key: &str) -> Option<u64> {
    debug_assert!(tls::pass().is_null(), "one pass per thread");
    fork::once();
    planner::restart_if_needed();
    let _ = SENTINEL.try_with(|_| ());
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let cfg = enabled_config();
    let entry = cfg.and_then(|_| registry::entry(key));
    let mut pass = try_box(Pass::new(serial, entry))?;
    if let (Some(cfg), Some(entry)) = (cfg, entry) {
        entry.touch();
        cache::age(cache::aging_period(cfg.max_plans));
        choose(entry, cfg, &mut pass);
    }
    let hot = match (pass.mode, cfg.is_some()) {
        (Mode::Profile, _) => Hot::Profile,
        // A replay without a slab counts its allocations on the backend path; they are
        // all `NoSlab` misses (see `end_replay`).
        (Mode::Replay, _) if pass.no_slab => Hot::Counted,
        (Mode::Replay, _) => Hot::Replay,
        (Mode::Backend, true) => Hot::Counted,
        (Mode::Backend, false) => Hot::Backend,
    };
    let p = Box::into_raw(pass);
    tls::with(
        |s| {
            s.pass.set(p);
            tls::set_mode(s, hot);
        },
        (),
    );
    Some(serial)
}

/// Profile, replay or backend for this pass of `entry`.
fn choose(entry: &'static KeyEntry, cfg: &Config, pass: &mut Pass) {
    if cfg.mode == ConfigMode::Profile {
        if let Some(rec) = Recorder::new(entry_key(entry), cfg.backtrace, Bounds::of(cfg)) {
            pass.recorder = Some(rec);
            pass.mode = Mode::Profile;
        }
        return;
    }
    let state = entry.state();
    if matches!(state, KeyState::Unplanned | KeyState::Stale(_)) && entry.may_profile() {
        // A stale key keeps its place in the cache; a key without a plan must earn one.
        let admitted = matches!(state, KeyState::Stale(_)) || cache::admit(entry, cfg.max_plans);
        if !admitted {
            stats::add(&GLOBAL.admissions_refused, 1);
            stats::add(&entry.counters.admissions_refused, 1);
        } else if entry.begin_profile() {
            entry.note_profile(cfg.max_plans);
            match Recorder::new(entry_key(entry), cfg.backtrace, Bounds::of(cfg)) {
                Some(rec) => {
                    pass.recorder = Some(rec);
                    pass.mode = Mode::Profile;
                    return;
                }
                None => {
                    entry.abandon_profile();
                    stats::add(
                        &GLOBAL.profiles_abandoned[AbandonReason::OutOfMemory as usize],
                        1,
                    );
                }
            }
        }
    }
    // Replay the published plan (also while another thread re-profiles the key).
    let (_reading, slabs) = entry.read();
    if slabs.is_null() {
        return;
    }
    // SAFETY: the read guard keeps the plan from being freed until we registered with it
    // through `acquire` (which counts us in `active`).
    let s = unsafe { &*slabs };
    pass.mode = Mode::Replay;
    match s.acquire() {
        Some(inst) => {
            pass.slabs = slabs;
            pass.plan = &s.plan;
            pass.inst = inst;
            // SAFETY: `inst` is held by this pass.
            pass.base = unsafe { (*inst).base };
        }
        None => pass.no_slab = true, // every allocation misses with NoSlab
    }
}

/// The key as a `'static` string: entries are never freed.
fn entry_key(entry: &'static KeyEntry) -> &'static str {
    &entry.key
}

/// Ends this thread's pass `serial`, if it is the running one (with the re-entrancy guard
/// set). `abandon`: the pass is cut short (a panic, a thread exit).
pub(crate) fn end(serial: u64, abandon: Option<AbandonReason>) {
    let p = tls::with(
        |s| {
            let p = s.pass.get();
            // SAFETY: a non-null pass pointer is this thread's running pass.
            if p.is_null() || unsafe { (*p).serial } != serial {
                return ptr::null_mut();
            }
            s.pass.set(ptr::null_mut());
            tls::set_mode(s, Hot::Backend);
            p
        },
        ptr::null_mut(),
    );
    if p.is_null() {
        return; // ended already (by the thread's exit) or not started
    }
    // SAFETY: `p` came from Box::into_raw in `start` and was just detached from the thread.
    let mut pass = unsafe { Box::from_raw(p) };
    let abandon = pass.abandoned.or(abandon);
    match pass.mode {
        Mode::Profile => end_profile(&mut pass, abandon),
        Mode::Replay => end_replay(&mut pass, abandon),
        Mode::Backend => {
            stats::add(&GLOBAL.passes_backend, 1);
            stats::add(&GLOBAL.backend_pass_allocations, pass.counters.allocations);
            if let Some(e) = pass.entry {
                stats::add(&e.counters.passes_backend, 1);
            }
        }
    }
    RECLAIMER.reclaim();
}

fn end_profile(pass: &mut Pass, abandon: Option<AbandonReason>) {
    stats::add(&GLOBAL.passes_profiled, 1);
    stats::add(&GLOBAL.profiled_allocations, pass.counters.allocations);
    let entry = pass.entry;
    // This pass's number among the key's profiled passes (names its trace files): taken
    // from the increment itself, so concurrent profiles get distinct numbers.
    let serial = entry.map(|e| e.counters.passes_profiled.fetch_add(1, Ordering::Relaxed) + 1);
    let trace = match (pass.recorder.take(), abandon) {
        (Some(rec), None) => rec.finish(),
        (_, Some(reason)) => Err(reason),
        (None, None) => Err(AbandonReason::OutOfMemory), // not reached: see `choose`
    };
    let trace = match trace {
        Ok(trace) => trace,
        Err(reason) => return abandon_profile(entry, reason),
    };
    // The key's previous plan, held for merging into the new one.
    let base = entry.and_then(Pinned::current);
    let job = Job {
        trace,
        entry,
        serial,
        base,
    };
    if !planner::submit(job) {
        abandon_profile(entry, AbandonReason::PlannerBusy);
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

fn end_replay(pass: &mut Pass, abandon: Option<AbandonReason>) {
    if pass.no_slab {
        pass.counters.misses[MissReason::NoSlab as usize] = pass.counters.allocations;
    }
    pass.counters.allocations = pass.counters.slab_hits + pass.counters.missed();
    if !pass.slabs.is_null() {
        // SAFETY: the pass registered with `slabs` at start; it stays alive until
        // released here, and the pass is over.
        let released = unsafe { (*pass.slabs).release(pass.inst, abandon.is_some()) };
        note_released(&released);
    }
    stats::add(&GLOBAL.passes_replayed, 1);
    GLOBAL.add_replay(&pass.counters);
    let Some(e) = pass.entry else { return };
    e.count_replay(&pass.counters);
    if abandon.is_some() {
        // Unwinding or exiting: what it allocated says nothing about the profile.
        stats::add(&GLOBAL.replays_abandoned, 1);
        stats::add(&e.counters.replays_abandoned, 1);
        return;
    }
    let cfg = config::config();
    let diverged = e.note_divergence(&pass.counters, cfg.miss_window, cfg.replan_miss_ratio);
    if diverged && !pass.slabs.is_null() {
        e.mark_stale(pass.slabs);
    }
}

fn note_released(r: &Released) {
    stats::add(&GLOBAL.slots_demoted, r.demoted);
    stats::add(&GLOBAL.pages_returned_bytes, r.pages_returned);
}

/// Gives up this thread's running profile or replay for `reason`, from the allocation
/// path (with the re-entrancy guard set): the rest of the pass runs on the backend,
/// uncounted, and the pass is abandoned when it ends.
pub(crate) fn abandon_running(pass: &mut Pass, reason: AbandonReason) {
    if pass.abandoned.is_some() {
        return;
    }
    pass.abandoned = Some(reason);
    // Dropping the recorder frees its buffers now (the guard is set: to the backend).
    drop(pass.recorder.take());
    tls::with(|s| tls::set_mode(s, Hot::Backend), ());
}
