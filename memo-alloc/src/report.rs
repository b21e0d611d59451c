//! `stats()` and `report(key)`.

use crate::registry;
use crate::stats::{Stats, GLOBAL, MISS_REASONS};
use crate::sync::{fence, Ordering};
use crate::tls;

/// Process-wide counters (**contract**). Passes still running are counted when they end.
///
/// ```
/// let s = memo_alloc::stats();
/// assert!(s.slab_hits <= s.replay_allocations);
/// ```
pub fn stats() -> Stats {
    tls::with_bookkeeping(|| {
        let mut s = GLOBAL.snapshot();
        let (plans, slabs, resident) = registry::totals();
        s.plans = plans;
        s.slabs = slabs;
        s.slab_resident_bytes = resident;
        s.reserved_bytes = crate::region::reserved() as u64;
        s
    })
}

/// One pass key: its last profile, its plan and its replay counters (**contract**).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassReport {
    /// The pass key.
    pub key: String,
    /// `unplanned`, `profiling`, `planned` or `replan`.
    pub state: &'static str,
    /// Allocations in the last profiled pass (reallocs included).
    pub allocations: u64,
    /// Allocation keys planned into the slab.
    pub planned: u64,
    /// Allocation keys that escaped the pass.
    pub escaping: u64,
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
    /// Slab instances of the current plan (the peak number of concurrent passes).
    pub slab_instances: u64,
    /// Bytes of the current plan's slabs resident right now (`mincore`).
    pub slab_resident_bytes: u64,
    /// Passes profiled, replayed, and run on the backend.
    pub passes_profiled: u64,
    /// Passes replayed.
    pub passes_replayed: u64,
    /// Passes that ran on the backend.
    pub passes_backend: u64,
    /// Allocations served from slabs.
    pub slab_hits: u64,
    /// Misses by reason (indexed like [`crate::MissReason`]).
    pub misses_by_reason: [u64; MISS_REASONS],
}

/// The report of one pass key, or `None` if no pass of it ran.
pub fn report(key: &str) -> Option<PassReport> {
    tls::with_bookkeeping(|| {
        let e = registry::find(key)?;
        let r = Ordering::Relaxed;
        let mut rep = PassReport {
            key: key.to_string(),
            state: match e.state.load(r) {
                registry::UNPLANNED => "unplanned",
                registry::PROFILING => "profiling",
                registry::PLANNED => "planned",
                _ => "replan",
            },
            passes_profiled: e.passes_profiled.load(r),
            passes_replayed: e.passes_replayed.load(r),
            passes_backend: e.passes_backend.load(r),
            slab_hits: e.slab_hits.load(r),
            ..PassReport::default()
        };
        for (m, g) in rep.misses_by_reason.iter_mut().zip(&e.misses) {
            *m = g.load(r);
        }
        if let Some(s) = e.summary.with(|s| s.clone()) {
            rep.allocations = s.allocations;
            rep.planned = s.planned;
            rep.escaping = s.escaping;
            rep.reallocs = s.reallocs;
            rep.events = s.events;
            rep.scopes = s.scopes;
            rep.height = s.height;
            rep.lower_bound = s.lower_bound;
            rep.naive = s.naive;
            rep.strategy = s.strategy;
            rep.plan_millis = s.plan_millis;
        }
        e.entering.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::SeqCst); // as in `pass::choose`
        let slabs = e.slabs.load(Ordering::Acquire);
        if !slabs.is_null() {
            // SAFETY: `entering` keeps the published plan alive while we read it.
            let s = unsafe { &*slabs };
            rep.slab_instances = s.instances() as u64;
            rep.slab_resident_bytes = s.resident_bytes();
        }
        e.entering.fetch_sub(1, Ordering::AcqRel);
        Some(rep)
    })
}
