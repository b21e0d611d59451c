//! A planning job: from a finished profile to a published plan. Merge it with the key's
//! previous plan, plan it (`document.rs`), write the trace and plan files, compile the
//! replay tables, publish them for the key, and keep the plan cache within its bound.

use std::time::Instant;

use crate::config::{Config, Mode};
use crate::format::files;
use crate::format::trace::{PlanFile, PlanLanes, Seen};
use crate::plan::document;
use crate::profiling::profile::{Profile, Record, NONE};
use crate::registry::cache;
use crate::registry::reclaim::RECLAIMER;
use crate::registry::{KeyEntry, Signature, Summary};
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::slab::pool::{Slabs, MAX_INSTANCES};
use crate::support::sync::Ordering;

/// A finished profile to plan.
pub(crate) struct Job {
    pub(crate) profile: Profile,
    pub(crate) entry: Option<&'static KeyEntry>,
    /// The pass's number among its key's profiles (names its files).
    pub(crate) serial: Option<u64>,
    /// The key's previous plan, held for merging into the new one.
    pub(crate) base: Option<Pinned>,
    /// The signature of the profiled pass's first requests (see `registry::classes`).
    pub(crate) signature: Signature,
    /// The plan takes over `signature` as its entry's (a class no pass matched, replaced);
    /// else the entry keeps its own (see `registry::classes`).
    pub(crate) retag: bool,
}

/// A plan held by a job: registered in its `active` count, so it is not freed meanwhile.
pub(crate) struct Pinned(*const Slabs);

// SAFETY: the pointer is only read through `Pinned::get`; the plan is immutable apart
// from atomics, and stays alive while pinned.
unsafe impl Send for Pinned {}

impl Pinned {
    /// Pins `entry`'s current plan, if it has one.
    pub(crate) fn current(entry: &KeyEntry) -> Option<Pinned> {
        let (_reading, slabs) = entry.read();
        // SAFETY: the read guard keeps the plan alive until it is registered (`pin`).
        let s = unsafe { slabs.as_ref()? };
        s.active.fetch_add(1, Ordering::AcqRel);
        Some(Pinned(slabs))
    }

    /// The pinned plan.
    pub(crate) fn get(&self) -> &Slabs {
        // SAFETY: registered in `active`: not freed until `drop`.
        unsafe { &*self.0 }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        self.get().active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Makes the next plan panic, for the test of the planner's recovery
/// (`testing::panic_next_plan`).
pub(crate) static PANIC_NEXT_PLAN: crate::support::sync::plain::AtomicBool =
    crate::support::sync::plain::AtomicBool::new(false);

impl Job {
    /// Whether the job makes its key's first plan, which moves the key's passes from the
    /// backend to slabs (the planner then purges the backend, `worker::run`): no previous
    /// plan to merge into, and not a shape class's (a class's key is on slabs already).
    pub(crate) fn first_plan(&self) -> bool {
        self.base.is_none() && !self.entry.is_some_and(|e| e.classes.is_class())
    }

    /// Plans the profile and publishes the plan (on the planner thread, or inline; see
    /// `worker.rs`).
    pub(crate) fn run(self, cfg: &Config) {
        if PANIC_NEXT_PLAN.swap(false, Ordering::AcqRel) {
            panic!("memomalloc test hook: this plan panics");
        }
        let Job {
            profile,
            entry,
            serial,
            base,
            signature,
            retag,
        } = self;
        // Merged with the key's previous plan, if any: plans converge (see `merge`).
        let seen = base
            .as_ref()
            .map(|b| crate::plan::merge::seen_in(&profile, &b.get().plan))
            .unwrap_or_default();
        let lanes = lanes_after(base.as_ref().map(|b| &b.get().plan.lanes), cfg);
        drop(base);
        plan_and_publish(profile, &seen, &lanes, entry, serial, cfg);
        if let Some(e) = entry.filter(|e| e.has_plan()) {
            e.classes.published(&signature, retag);
        }
    }
}

/// The lanes a new plan starts from: the configured bound, and the previous plan's cells
/// when it had the same bound (not its escapes: lane ordinals are the profile's own).
fn lanes_after(
    previous: Option<&crate::replay::slab::cells::LaneLayout>,
    cfg: &Config,
) -> PlanLanes {
    let cells = previous
        .filter(|l| l.max == cfg.lanes)
        .map(|l| l.cells())
        .unwrap_or_default();
    PlanLanes {
        max: cfg.lanes,
        cells,
        ..PlanLanes::default()
    }
}

/// Plans a finished profile of `entry` (`serial`: its number among the key's profiles;
/// `seen`: what earlier profiles saw for its keys), writes its files, and in replay mode
/// publishes the plan. The trace document is made only when its files are written (see
/// `profile`).
fn plan_and_publish(
    profile: Profile,
    seen: &[Option<Seen>],
    lanes: &PlanLanes,
    entry: Option<&'static KeyEntry>,
    serial: Option<u64>,
    cfg: &Config,
) {
    let counts = ProfileCounts::of(&profile);
    let t0 = Instant::now();
    let plan = match &cfg.trace_dir {
        Some(dir) => {
            let trace = profile.to_trace();
            let plan = document::build(profile, cfg.strategy, seen, lanes, give_back);
            files::write_pass(dir, &trace, &plan, serial);
            plan
        }
        None => document::build(profile, cfg.strategy, seen, lanes, give_back),
    };
    let plan_millis = t0.elapsed().as_secs_f64() * 1e3;
    let Some(entry) = entry else { return };
    let summary = summarize(&counts, &plan, plan_millis);
    entry.summary(|s| *s = Some(summary));
    if cfg.mode != Mode::Replay {
        return;
    }
    match CompiledPlan::compile(&plan) {
        Ok(compiled) => publish(entry, compiled, cfg.max_plans),
        Err(e) => {
            eprintln!("memomalloc: pass {:?} could not be planned: {e}", plan.key);
            entry.abandon_profile();
        }
    }
}

/// Keeps a planned profile's record buffer for the next profiles (when small).
fn give_back(records: Vec<Record>) {
    crate::profiling::recorder::keep_spare(Vec::new(), records);
}

/// What a pass's summary says of its profile, taken before planning consumes it.
struct ProfileCounts {
    allocations: u64,
    reallocs: u64,
    events: u64,
    scopes: u64,
}

impl ProfileCounts {
    fn of(profile: &Profile) -> ProfileCounts {
        ProfileCounts {
            allocations: profile.records.len() as u64
                + profile.lanes.requests
                + profile.lanes.reallocs,
            reallocs: profile.records.iter().filter(|r| r.parent != NONE).count() as u64
                + profile.lanes.reallocs,
            events: profile.events,
            scopes: profile.scopes.len() as u64,
        }
    }
}

fn summarize(counts: &ProfileCounts, plan: &PlanFile, plan_millis: f64) -> Summary {
    Summary {
        allocations: counts.allocations,
        planned: plan.slots.iter().filter(|s| s.offset.is_some()).count() as u64,
        // A lane request that escaped is an escaping allocation, served by the backend.
        escaping: plan.slots.iter().filter(|s| s.offset.is_none()).count() as u64
            + plan.lanes.escapes.len() as u64,
        lane_requests: plan
            .lanes
            .requests
            .saturating_sub(plan.lanes.escapes.len() as u64),
        lane_bytes: plan.lanes.bytes(),
        reallocs: counts.reallocs,
        events: counts.events,
        scopes: counts.scopes,
        height: plan.height,
        lower_bound: plan.lower_bound,
        naive: plan.naive,
        strategy: plan.strategy.clone(),
        plan_millis,
    }
}

/// Publishes `compiled` as the plan of `entry`, which this thread is profiling, and
/// evicts plans beyond `max_plans`.
fn publish(entry: &'static KeyEntry, compiled: CompiledPlan, max_plans: usize) {
    let Some(slabs) = Slabs::new(compiled, MAX_INSTANCES) else {
        entry.abandon_profile();
        return;
    };
    let raw = Box::into_raw(slabs);
    // SAFETY: `raw` is a fresh box owned here.
    if let Err(raw) = unsafe { entry.publish(raw, &RECLAIMER) } {
        // SAFETY: not published: still ours.
        drop(unsafe { Box::from_raw(raw) });
        return;
    }
    cache::evict_beyond(max_plans, entry);
}
