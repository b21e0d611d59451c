//! Whether a key's replays diverge from its plan enough to profile it again.

use crate::stats::PassCounters;
use crate::support::sync::{plain, Ordering};

/// Consecutive diverged windows that re-profile a key.
pub(crate) const DIVERGED_WINDOWS: u32 = 2;

/// The divergence window of a key's current plan: the counts of its last replayed passes
/// (relaxed: a pass counted late or in the next window changes no outcome much).
#[derive(Default)]
pub(crate) struct Divergence {
    allocs: plain::AtomicU64,
    misses: plain::AtomicU64,
    bytes: plain::AtomicU64,
    diverged_bytes: plain::AtomicU64,
    /// Planned slots the window's passes skipped (see [`Divergence::note`]).
    skipped: plain::AtomicU64,
    passes: plain::AtomicU32,
    /// Consecutive windows that diverged.
    streak: plain::AtomicU32,
}

impl Divergence {
    /// Adds a replayed pass's counters `c` to the window; returns `true` when the
    /// divergence persists: [`DIVERGED_WINDOWS`] windows of `window` passes in a row in
    /// which the misses that say the program diverged exceed `ratio` of the allocations or
    /// of the bytes. A thread's first pass making allocations of its own, or any other
    /// one-off, does not re-profile the key.
    ///
    /// One such window is enough when the planned slots its passes skipped alone exceed
    /// `ratio` of the allocations: the profiled pass made allocations that the passes
    /// after it do not (a process's first pass building lazy state). A one-off of a
    /// replayed pass adds allocations rather than dropping planned ones, so this does not
    /// come from one pass, and the plan converges after one window instead of two.
    pub(crate) fn note(&self, c: &PassCounters, window: u32, ratio: f64) -> bool {
        let r = Ordering::Relaxed;
        let allocs = self.allocs.fetch_add(c.allocations, r) + c.allocations;
        let misses = self.misses.fetch_add(c.diverged(), r) + c.diverged();
        let all = c.slab_bytes + c.diverged_bytes;
        let bytes = self.bytes.fetch_add(all, r) + all;
        let dbytes = self.diverged_bytes.fetch_add(c.diverged_bytes, r) + c.diverged_bytes;
        let skipped = self.skipped.fetch_add(c.skipped, r) + c.skipped;
        let passes = self.passes.fetch_add(1, r) + 1;
        if passes < window {
            return false;
        }
        self.clear();
        let over = |n: u64, of: u64| n as f64 > ratio * of as f64;
        let diverged = allocs > 0 && (over(misses, allocs) || over(dbytes, bytes));
        if !diverged {
            self.streak.store(0, r);
            return false;
        }
        let streak = self.streak.fetch_add(1, r) + 1;
        let needed = if over(skipped, allocs) {
            1
        } else {
            DIVERGED_WINDOWS
        };
        streak >= needed
    }

    /// Empties the window (its streak stays).
    fn clear(&self) {
        let r = Ordering::Relaxed;
        self.allocs.store(0, r);
        self.misses.store(0, r);
        self.bytes.store(0, r);
        self.diverged_bytes.store(0, r);
        self.skipped.store(0, r);
        self.passes.store(0, r);
    }

    /// A new plan starts a new window, with no streak.
    pub(crate) fn restart(&self) {
        self.clear();
        self.streak.store(0, Ordering::Relaxed);
    }
}
