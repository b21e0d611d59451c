//! What a program reads back: [`stats`] (process-wide counters), [`report`] (one pass
//! key) and [`keys`] (every key).

use serde::{Deserialize, Serialize};

use crate::registry::reclaim::RECLAIMER;
use crate::registry::{self, PlanState};
use crate::stats::{Misses, Stats, GLOBAL};
use crate::support::sync::Ordering;
use crate::support::thread;

/// Process-wide counters (**contract**). Passes still running are counted when they end.
///
/// ```
/// let s = memo_alloc::stats();
/// assert!(s.slab_hits <= s.replay_allocations);
/// ```
pub fn stats() -> Stats {
    thread::with_bookkeeping(|| {
        let mut s = GLOBAL.snapshot();
        let (plans, slabs, pinned, resident) = registry::totals();
        let (retired, retired_slabs) = RECLAIMER.pending();
        s.plans = plans;
        s.slabs = slabs + retired_slabs;
        s.instances_pinned = pinned;
        s.retired_plans = retired;
        let (idle, idle_resident) = crate::memory::blocks::idle_resident();
        s.idle_blocks = idle;
        s.slab_resident_bytes = resident + idle_resident;
        s.reserved_bytes = crate::memory::region::reserved() as u64;
        s
    })
}

/// One pass key: its last profile, its plan and its replay counters (**contract**). It
/// serialises with serde.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct PassReport {
    /// The pass key.
    pub key: String,
    /// Where the key's plan stands.
    pub state: PlanState,
    /// Allocations in the last profiled pass (reallocs included).
    pub allocations: u64,
    /// Allocation keys planned into the slab.
    pub planned: u64,
    /// Allocation keys that escaped the pass (lane requests that escaped among them).
    pub escaping: u64,
    /// Allocations of the last profiled pass small enough for lanes that did not escape
    /// it: in replay they take a cell of their size class, not a slot (see
    /// `Config::lanes`).
    pub lane_requests: u64,
    /// Bytes of the plan's lane cells: each instance's lane block, beside its slots' block.
    pub lane_bytes: u64,
    /// Reallocs in the last profiled pass.
    pub reallocs: u64,
    /// Events (the pass's final time).
    pub events: u64,
    /// Scopes (ops) in the pass, the pass itself included.
    pub scopes: u64,
    /// Slab height of the plan in bytes.
    pub height: u64,
    /// Offsets lower bound (peak live bytes of the planned allocations).
    pub lower_bound: u64,
    /// Sum of the planned sizes.
    pub naive: u64,
    /// Strategy of the plan.
    pub strategy: String,
    /// Time planning took, in milliseconds.
    pub plan_millis: f64,
    /// Slab instances of the current plan (the peak number of concurrent passes, plus
    /// instances pinned by blocks that outlived their pass).
    pub slab_instances: u64,
    /// Instances of the current plan put back with live slots.
    pub instances_pinned: u64,
    /// Slots of the current plan served by the backend (demoted).
    pub slots_demoted: u64,
    /// Bytes of the current plan's slabs resident right now (`mincore`).
    pub slab_resident_bytes: u64,
    /// Passes profiled (abandoned profiles included).
    pub passes_profiled: u64,
    /// Passes replayed.
    pub passes_replayed: u64,
    /// Passes that ran on the backend.
    pub passes_backend: u64,
    /// Profiles given up (out of memory, bounds, panics, thread exits).
    pub profiles_abandoned: u64,
    /// Replayed passes that unwound or whose thread exited (not counted as divergence).
    pub replays_abandoned: u64,
    /// Times the key's plan was evicted from the cache.
    pub evictions: u64,
    /// Passes not profiled because the cache was full of keys used more often.
    pub admissions_refused: u64,
    /// Allocations served from slabs.
    pub slab_hits: u64,
    /// Misses by reason.
    pub misses_by_reason: Misses,
    /// Shape classes the key has beyond its own, each reported as `<key>#<n>` (0 for a
    /// key whose passes come in one shape, and for a class). The passes a class decides
    /// are counted in the class's report, not in the key's.
    #[serde(default)]
    pub shape_classes: u64,
}

/// The report of one pass key, or `None` if no pass of it ran.
pub fn report(key: &str) -> Option<PassReport> {
    thread::with_bookkeeping(|| {
        let e = registry::find(key)?;
        let r = Ordering::Relaxed;
        let c = &e.counters;
        let mut rep = PassReport {
            key: key.to_string(),
            state: e.state().plan_state(),
            passes_profiled: c.passes_profiled.load(r),
            passes_replayed: c.passes_replayed.load(r),
            passes_backend: c.passes_backend.load(r),
            profiles_abandoned: c.profiles_abandoned.load(r),
            replays_abandoned: c.replays_abandoned.load(r),
            evictions: c.evictions.load(r),
            admissions_refused: c.admissions_refused.load(r),
            slab_hits: c.slab_hits.load(r),
            misses_by_reason: Misses::from_counts(std::array::from_fn(|i| c.misses[i].load(r))),
            shape_classes: e.class_count() as u64 - 1,
            ..PassReport::default()
        };
        if let Some(s) = e.summary(|s| s.clone()) {
            rep.allocations = s.allocations;
            rep.planned = s.planned;
            rep.escaping = s.escaping;
            rep.lane_requests = s.lane_requests;
            rep.lane_bytes = s.lane_bytes;
            rep.reallocs = s.reallocs;
            rep.events = s.events;
            rep.scopes = s.scopes;
            rep.height = s.height;
            rep.lower_bound = s.lower_bound;
            rep.naive = s.naive;
            rep.strategy = s.strategy;
            rep.plan_millis = s.plan_millis;
        }
        let (_reading, slabs) = e.read();
        if !slabs.is_null() {
            // SAFETY: the read guard keeps the published plan alive while we read it.
            let s = unsafe { &*slabs };
            rep.slab_instances = s.instances() as u64;
            rep.instances_pinned = s.pinned() as u64;
            rep.slots_demoted = s.plan.demoted();
            rep.slab_resident_bytes = s.resident_bytes();
        }
        Some(rep)
    })
}

/// The pass keys the allocator knows, sorted: every key a pass was started with, and every
/// key holding a plan loaded from a file (at most 4,096 keys; the name of a `pass()` inside
/// a pass, which is a scope, is none). [`report`] gives each one's figures.
///
/// ```
/// drop(memo_alloc::pass("keys-doc"));
/// assert!(memo_alloc::keys().iter().any(|k| k == "keys-doc"));
/// ```
pub fn keys() -> Vec<String> {
    thread::with_bookkeeping(|| {
        let mut keys = Vec::new();
        registry::for_each(|e| {
            if e.last_used() > 0 || e.has_plan() {
                keys.push(e.key.to_string());
            }
        });
        keys.sort_unstable();
        keys
    })
}
