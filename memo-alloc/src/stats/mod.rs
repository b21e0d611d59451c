//! Process-wide counters. Passes count in plain per-pass fields and add them here when
//! they end, so the allocation path never touches a shared cache line.

use crate::support::sync::{plain::AtomicU64, Ordering};

/// Why an allocation inside a replayed pass was served by the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum MissReason {
    /// No slot was planned for this (scope, ordinal): an extra allocation or an unknown op.
    Unplanned = 0,
    /// The allocation escaped the profiled pass, so it is never planned; or its slot was
    /// demoted (its blocks kept outliving replayed passes, or the plan's overlap checks
    /// for it were too costly).
    Escaping = 1,
    /// The request is larger than the slot.
    TooLarge = 2,
    /// The request needs a stricter alignment than the slot has.
    Alignment = 3,
    /// A slot overlapping this one in address is still live (the program diverged).
    Overlap = 4,
    /// A realloc needed more room than its slot: moved to the backend.
    ReallocGrow = 5,
    /// The pass got no slab (pool full or no address space): all its allocations missed.
    NoSlab = 6,
}

/// Number of [`MissReason`]s.
pub const MISS_REASONS: usize = 7;

impl MissReason {
    /// Every reason, in counter order.
    pub const ALL: [MissReason; MISS_REASONS] = [
        MissReason::Unplanned,
        MissReason::Escaping,
        MissReason::TooLarge,
        MissReason::Alignment,
        MissReason::Overlap,
        MissReason::ReallocGrow,
        MissReason::NoSlab,
    ];

    /// Short name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            MissReason::Unplanned => "unplanned",
            MissReason::Escaping => "escaping",
            MissReason::TooLarge => "too_large",
            MissReason::Alignment => "alignment",
            MissReason::Overlap => "overlap",
            MissReason::ReallocGrow => "realloc_grow",
            MissReason::NoSlab => "no_slab",
        }
    }
}

/// Why a profile was given up before it was planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum AbandonReason {
    /// The backend failed an allocation, or the recorder's own memory could not grow.
    OutOfMemory = 0,
    /// The pass recorded more events or bytes than `Config::max_profile_events` /
    /// `Config::max_profile_bytes`.
    Bound = 1,
    /// The pass unwound (a panic).
    Panic = 2,
    /// The thread exited with the pass open (its guard was leaked).
    ThreadExit = 3,
    /// The planner's queue was full.
    PlannerBusy = 4,
    /// A pass's future was dropped before it completed.
    Cancelled = 5,
}

/// Number of [`AbandonReason`]s.
pub const ABANDON_REASONS: usize = 6;

impl AbandonReason {
    /// Every reason, in counter order.
    pub const ALL: [AbandonReason; ABANDON_REASONS] = [
        AbandonReason::OutOfMemory,
        AbandonReason::Bound,
        AbandonReason::Panic,
        AbandonReason::ThreadExit,
        AbandonReason::PlannerBusy,
        AbandonReason::Cancelled,
    ];

    /// Short name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            AbandonReason::OutOfMemory => "out_of_memory",
            AbandonReason::Bound => "bound",
            AbandonReason::Panic => "panic",
            AbandonReason::ThreadExit => "thread_exit",
            AbandonReason::PlannerBusy => "planner_busy",
            AbandonReason::Cancelled => "cancelled",
        }
    }
}

/// Why a plan file in `MEMO_PLAN_DIR` was not loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum PlanRejection {
    /// The file could not be read.
    Unreadable = 0,
    /// Not JSON, or not a document of the expected shape (a truncated file, say).
    Malformed = 1,
    /// Another format name or version.
    Unsupported = 2,
    /// A field out of bounds or inconsistent with the others.
    Invalid = 3,
}

/// Number of [`PlanRejection`]s.
pub const PLAN_REJECTIONS: usize = 4;

impl PlanRejection {
    /// Every reason, in counter order.
    pub const ALL: [PlanRejection; PLAN_REJECTIONS] = [
        PlanRejection::Unreadable,
        PlanRejection::Malformed,
        PlanRejection::Unsupported,
        PlanRejection::Invalid,
    ];

    /// Short name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            PlanRejection::Unreadable => "unreadable",
            PlanRejection::Malformed => "malformed",
            PlanRejection::Unsupported => "unsupported",
            PlanRejection::Invalid => "invalid",
        }
    }
}

/// Counters of one pass, owned by its thread.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PassCounters {
    /// Allocations made (served or missed); in backend passes, all of them.
    pub(crate) allocations: u64,
    pub(crate) slab_hits: u64,
    /// Of the slab hits, those served by lane cells (not in the matching's clock).
    pub(crate) lane_hits: u64,
    pub(crate) slab_bytes: u64,
    pub(crate) misses: [u64; MISS_REASONS],
    /// Bytes of the misses that say the program diverged (see `diverged`).
    pub(crate) diverged_bytes: u64,
    /// Planned slots passed over by re-synchronising: allocations the plan expects and the
    /// program no longer makes (not misses, but divergence: see `diverged`).
    pub(crate) skipped: u64,
}

impl PassCounters {
    /// Whether a miss for `reason` says the program diverged from its profile.
    pub(crate) fn diverges(reason: MissReason) -> bool {
        !matches!(reason, MissReason::Escaping | MissReason::NoSlab)
    }

    /// Counts a miss of `bytes` for `reason`.
    #[inline]
    pub(crate) fn miss(&mut self, reason: MissReason, bytes: u64) {
        self.misses[reason as usize] += 1;
        if PassCounters::diverges(reason) {
            self.diverged_bytes += bytes;
        }
    }

    /// Misses that say the program diverged from its profile (escapes and missing slabs
    /// do not: profiling again would not change them), and the planned slots it skipped.
    pub(crate) fn diverged(&self) -> u64 {
        self.skipped + self.misses.iter().sum::<u64>()
            - self.misses[MissReason::Escaping as usize]
            - self.misses[MissReason::NoSlab as usize]
    }

    /// Misses of every reason.
    pub(crate) fn missed(&self) -> u64 {
        self.misses.iter().sum()
    }
}

/// Process-wide counters (a snapshot; passes still running are not included yet).
///
/// Shares follow from the counters alone: of all allocations made inside passes,
/// `slab_hits / pass_allocations()` were served from slabs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// Misses by reason, indexed by [`MissReason`] as `usize`.
    pub misses_by_reason: [u64; MISS_REASONS],
    /// Profiles given up before planning, by [`AbandonReason`] as `usize`.
    pub profiles_abandoned: [u64; ABANDON_REASONS],
    /// Replayed passes that unwound or whose thread exited: their counters count toward
    /// nothing (neither divergence nor the shares above).
    pub replays_abandoned: u64,
    /// Plan files loaded from `MEMO_PLAN_DIR`.
    pub plan_files_loaded: u64,
    /// Plan files rejected, by [`PlanRejection`] as `usize`.
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
        self.misses_by_reason[reason as usize]
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

pub(crate) struct Global {
    pub(crate) passes_profiled: AtomicU64,
    pub(crate) passes_replayed: AtomicU64,
    pub(crate) passes_backend: AtomicU64,
    pub(crate) replay_allocations: AtomicU64,
    pub(crate) profiled_allocations: AtomicU64,
    pub(crate) backend_pass_allocations: AtomicU64,
    pub(crate) slab_hits: AtomicU64,
    pub(crate) slab_bytes: AtomicU64,
    pub(crate) misses: [AtomicU64; MISS_REASONS],
    pub(crate) profiles_abandoned: [AtomicU64; ABANDON_REASONS],
    pub(crate) replays_abandoned: AtomicU64,
    pub(crate) plan_files_loaded: AtomicU64,
    pub(crate) plan_files_rejected: [AtomicU64; PLAN_REJECTIONS],
    pub(crate) evictions: AtomicU64,
    pub(crate) churn: AtomicU64,
    pub(crate) admissions_refused: AtomicU64,
    pub(crate) slots_demoted: AtomicU64,
    pub(crate) pages_returned_bytes: AtomicU64,
    pub(crate) parks: AtomicU64,
}

pub(crate) static GLOBAL: Global = Global {
    passes_profiled: AtomicU64::new(0),
    passes_replayed: AtomicU64::new(0),
    passes_backend: AtomicU64::new(0),
    replay_allocations: AtomicU64::new(0),
    profiled_allocations: AtomicU64::new(0),
    backend_pass_allocations: AtomicU64::new(0),
    slab_hits: AtomicU64::new(0),
    slab_bytes: AtomicU64::new(0),
    misses: [const { AtomicU64::new(0) }; MISS_REASONS],
    profiles_abandoned: [const { AtomicU64::new(0) }; ABANDON_REASONS],
    replays_abandoned: AtomicU64::new(0),
    plan_files_loaded: AtomicU64::new(0),
    plan_files_rejected: [const { AtomicU64::new(0) }; PLAN_REJECTIONS],
    evictions: AtomicU64::new(0),
    churn: AtomicU64::new(0),
    admissions_refused: AtomicU64::new(0),
    slots_demoted: AtomicU64::new(0),
    pages_returned_bytes: AtomicU64::new(0),
    parks: AtomicU64::new(0),
};

/// Adds `n` to a counter (relaxed: counters order nothing).
#[inline]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    if n != 0 {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

fn load_all<const N: usize>(counters: &[AtomicU64; N]) -> [u64; N] {
    std::array::from_fn(|i| counters[i].load(Ordering::Relaxed))
}

impl Global {
    pub(crate) fn add_replay(&self, c: &PassCounters) {
        add(&self.replay_allocations, c.allocations);
        add(&self.slab_hits, c.slab_hits);
        add(&self.slab_bytes, c.slab_bytes);
        for (g, &m) in self.misses.iter().zip(&c.misses) {
            add(g, m);
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let r = Ordering::Relaxed;
        let misses_by_reason = load_all(&self.misses);
        Stats {
            passes_profiled: self.passes_profiled.load(r),
            passes_replayed: self.passes_replayed.load(r),
            passes_backend: self.passes_backend.load(r),
            replay_allocations: self.replay_allocations.load(r),
            profiled_allocations: self.profiled_allocations.load(r),
            backend_pass_allocations: self.backend_pass_allocations.load(r),
            slab_hits: self.slab_hits.load(r),
            slab_bytes: self.slab_bytes.load(r),
            misses: misses_by_reason.iter().sum(),
            misses_by_reason,
            profiles_abandoned: load_all(&self.profiles_abandoned),
            replays_abandoned: self.replays_abandoned.load(r),
            plan_files_loaded: self.plan_files_loaded.load(r),
            plan_files_rejected: load_all(&self.plan_files_rejected),
            evictions: self.evictions.load(r),
            churn: self.churn.load(r),
            admissions_refused: self.admissions_refused.load(r),
            slots_demoted: self.slots_demoted.load(r),
            pages_returned_bytes: self.pages_returned_bytes.load(r),
            parks: self.parks.load(r),
            ..Stats::default()
        }
    }
}
