//! Process-wide counters. Passes count in plain per-pass fields and add them here when
//! they end, so the allocation path never touches a shared cache line.

use crate::sync::{AtomicU64, Ordering};

/// Why an allocation inside a replayed pass was served by the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum MissReason {
    /// No slot was planned for this (scope, ordinal): an extra allocation or an unknown op.
    Unplanned = 0,
    /// The allocation escaped the profiled pass, so it is never planned.
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

/// Counters of one pass, owned by its thread.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PassCounters {
    pub(crate) allocations: u64,
    pub(crate) slab_hits: u64,
    pub(crate) slab_bytes: u64,
    pub(crate) misses: [u64; MISS_REASONS],
}

impl PassCounters {
    /// Misses that say the program diverged from its profile (escapes and missing slabs
    /// do not: profiling again would not change them).
    pub(crate) fn diverged(&self) -> u64 {
        self.misses.iter().sum::<u64>()
            - self.misses[MissReason::Escaping as usize]
            - self.misses[MissReason::NoSlab as usize]
    }
}

/// Process-wide counters (a snapshot; passes still running are not included yet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Passes that were profiled.
    pub passes_profiled: u64,
    /// Passes served from a slab.
    pub passes_replayed: u64,
    /// Passes that ran on the backend (mode off, key being profiled elsewhere, no slab).
    pub passes_backend: u64,
    /// Allocations made inside replayed passes.
    pub replay_allocations: u64,
    /// Allocations served from a slab.
    pub slab_hits: u64,
    /// Bytes served from slabs.
    pub slab_bytes: u64,
    /// Allocations inside replayed passes served by the backend, all reasons together.
    pub misses: u64,
    /// Misses by reason, indexed by [`MissReason`] as `usize`.
    pub misses_by_reason: [u64; MISS_REASONS],
    /// Plans currently kept.
    pub plans: u64,
    /// Slab instances in existence (over all plans).
    pub slabs: u64,
    /// Bytes of virtual address space reserved for slabs.
    pub reserved_bytes: u64,
    /// Bytes of slab memory resident right now, measured with `mincore`.
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
}

pub(crate) struct Global {
    pub(crate) passes_profiled: AtomicU64,
    pub(crate) passes_replayed: AtomicU64,
    pub(crate) passes_backend: AtomicU64,
    pub(crate) replay_allocations: AtomicU64,
    pub(crate) slab_hits: AtomicU64,
    pub(crate) slab_bytes: AtomicU64,
    pub(crate) misses: [AtomicU64; MISS_REASONS],
}

pub(crate) static GLOBAL: Global = Global {
    passes_profiled: AtomicU64::new(0),
    passes_replayed: AtomicU64::new(0),
    passes_backend: AtomicU64::new(0),
    replay_allocations: AtomicU64::new(0),
    slab_hits: AtomicU64::new(0),
    slab_bytes: AtomicU64::new(0),
    misses: [const { AtomicU64::new(0) }; MISS_REASONS],
};

impl Global {
    pub(crate) fn add_replay(&self, c: &PassCounters) {
        let r = Ordering::Relaxed;
        self.replay_allocations.fetch_add(c.allocations, r);
        self.slab_hits.fetch_add(c.slab_hits, r);
        self.slab_bytes.fetch_add(c.slab_bytes, r);
        for (g, &m) in self.misses.iter().zip(&c.misses) {
            if m != 0 {
                g.fetch_add(m, r);
            }
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let r = Ordering::Relaxed;
        let mut misses_by_reason = [0; MISS_REASONS];
        for (m, g) in misses_by_reason.iter_mut().zip(&self.misses) {
            *m = g.load(r);
        }
        Stats {
            passes_profiled: self.passes_profiled.load(r),
            passes_replayed: self.passes_replayed.load(r),
            passes_backend: self.passes_backend.load(r),
            replay_allocations: self.replay_allocations.load(r),
            slab_hits: self.slab_hits.load(r),
            slab_bytes: self.slab_bytes.load(r),
            misses: misses_by_reason.iter().sum(),
            misses_by_reason,
            ..Stats::default()
        }
    }
}
