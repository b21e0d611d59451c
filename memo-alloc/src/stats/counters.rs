//! The counters behind [`Stats`]: each pass counts in plain fields of its own
//! ([`PassCounters`]) and adds them to the process-wide atomics ([`GLOBAL`]) when it ends,
//! so the allocation path never touches a shared cache line.

use crate::stats::misses::Misses;
use crate::stats::reasons::{MissReason, ABANDON_REASONS, MISS_REASONS, PLAN_REJECTIONS};
use crate::stats::snapshot::Stats;
use crate::support::sync::{plain::AtomicU64, Ordering};

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

/// The process-wide counters.
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

/// The process's counters.
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
            misses_by_reason: Misses::from_counts(misses_by_reason),
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
