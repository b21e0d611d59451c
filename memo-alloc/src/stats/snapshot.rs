//! [`Stats`]: a snapshot of the process-wide counters, as `memo_alloc::stats()` takes it.

use serde::{Deserialize, Serialize};

use crate::stats::misses::Misses;
use crate::stats::reasons::{
    AbandonReason, MissReason, PlanRejection, ABANDON_REASONS, PLAN_REJECTIONS,
};

/// Process-wide counters (a snapshot; passes still running are not included yet).
///
/// Shares follow from the counters alone: of all allocations made inside passes,
/// `slab_hits / pass_allocations()` were served from slabs. It serialises with serde (and
/// prints in the Prometheus text format: [`Stats::to_prometheus`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Stats {
    /// Passes that were profiled (abandoned profiles included).
    pub passes_profiled: u64,
    /// Passes served from a slab.
    pub passes_replayed: u64,
    /// Passes that ran on the backend (mode off, key being profiled elsewhere, profiling
    /// refused or backed off, registry full).
    pub passes_backend: u64,
    /// Allocations made inside replayed passes.
    pub replay_allocations: u64,
    /// Allocations made inside profiled passes.
    pub profiled_allocations: u64,
    /// Allocations made inside passes that ran on the backend.
    pub backend_pass_allocations: u64,
    /// Allocations served from a slab.
    pub slab_hits: u64,
    /// Bytes served from slabs.
    pub slab_bytes: u64,
    /// Allocations inside replayed passes served by the backend, all reasons together.
    pub misses: u64,
    /// Misses by reason.
    pub misses_by_reason: Misses,
    /// Profiles given up before planning, indexed by [`AbandonReason`] as `usize` (see
    /// [`Stats::profiles_abandoned_for`]).
    pub profiles_abandoned: [u64; ABANDON_REASONS],
    /// Replayed passes that unwound or whose thread exited: their counters count toward
    /// nothing (neither divergence nor the shares above).
    pub replays_abandoned: u64,
    /// Plan files loaded from `MEMO_PLAN_DIR`.
    pub plan_files_loaded: u64,
    /// Plan files rejected, indexed by [`PlanRejection`] as `usize` (see
    /// [`Stats::plan_files_rejected_for`]).
    pub plan_files_rejected: [u64; PLAN_REJECTIONS],
    /// Plans currently kept.
    pub plans: u64,
    /// Plans evicted from the cache (`Config::max_plans`).
    pub evictions: u64,
    /// Keys profiled again after their plan was evicted (a working set larger than the
    /// cache; warned about once on stderr).
    pub churn: u64,
    /// Profiles not started because the cache was full of keys used more often.
    pub admissions_refused: u64,
    /// Replaced or evicted plans not yet freed (waiting for their passes and live slots).
    pub retired_plans: u64,
    /// Slab instances in existence (over all plans, retired ones included).
    pub slabs: u64,
    /// Instances put back with live slots (pinned by blocks that outlived their pass).
    pub instances_pinned: u64,
    /// Slots served by the backend after their blocks kept outliving passes.
    pub slots_demoted: u64,
    /// Bytes of pinned instances' pages returned to the OS (in total).
    pub pages_returned_bytes: u64,
    /// Times an async pass gave its slab memory back between two polls, with no slot live
    /// (see [`crate::Pass::wrap`]).
    pub parks: u64,
    /// Blocks of slab memory idle right now, waiting for the next instance of any plan.
    pub idle_blocks: u64,
    /// Bytes of virtual address space reserved for slabs.
    pub reserved_bytes: u64,
    /// Bytes of slab memory resident right now, measured with `mincore` (idle blocks
    /// included).
    pub slab_resident_bytes: u64,
}

impl Stats {
    /// Misses for one reason.
    pub fn misses_for(&self, reason: MissReason) -> u64 {
        self.misses_by_reason.get(reason)
    }

    /// Profiles abandoned for one reason.
    pub fn profiles_abandoned_for(&self, reason: AbandonReason) -> u64 {
        self.profiles_abandoned[reason as usize]
    }

    /// Plan files rejected for one reason.
    pub fn plan_files_rejected_for(&self, reason: PlanRejection) -> u64 {
        self.plan_files_rejected[reason as usize]
    }

    /// Share of replayed allocations served from slabs (1.0 when there were none).
    pub fn slab_share(&self) -> f64 {
        if self.replay_allocations == 0 {
            1.0
        } else {
            self.slab_hits as f64 / self.replay_allocations as f64
        }
    }

    /// Allocations made inside passes of any kind.
    pub fn pass_allocations(&self) -> u64 {
        self.replay_allocations + self.profiled_allocations + self.backend_pass_allocations
    }

    /// Profiles abandoned, all reasons together.
    pub fn profiles_abandoned_total(&self) -> u64 {
        self.profiles_abandoned.iter().sum()
    }

    /// Plan files rejected, all reasons together.
    pub fn plan_files_rejected_total(&self) -> u64 {
        self.plan_files_rejected.iter().sum()
    }
}
