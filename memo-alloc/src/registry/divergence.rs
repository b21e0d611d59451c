//! Whether a key's replays diverge from its plan enough to profile it again.

use crate::stats::PassCounters;
use crate::support::sync::{plain, Ordering};

/// Consecutive diverged windows that re-profile a key.
pub(crate) const DIVERGED_WINDOWS: u32 = 2;

/// A window *fails* when its divergence misses exceed this share of its allocations: the
/// plan serves less than half of what the passes ask. Failing windows re-profile the key
/// however often it was re-profiled before.
pub(crate) const FAILING_RATIO: f64 = 0.5;

/// Whether `n` is more than `ratio` of `of`.
fn over(n: u64, of: u64, ratio: f64) -> bool {
    n as f64 > ratio * of as f64
}

/// Whether the misses that say the program diverged (`misses` of `allocs` requests,
/// `dbytes` of `bytes`) exceed `ratio` of the requests or of the bytes.
fn beyond(misses: u64, allocs: u64, dbytes: u64, bytes: u64, ratio: f64) -> bool {
    over(misses, allocs, ratio) || over(dbytes, bytes, ratio)
}

/// Divergence misses that make a replayed pass of another shape at the least (unless
/// most of its bytes diverged): a few misses of a small pass are a smaller shape's
/// probes (`replay::matching`, rule 5) or one-off requests, and the plan serves the rest.
pub(crate) const OTHER_SHAPE_MISSES: u64 = 16;

/// Whether a replayed pass's divergence misses (or its diverged bytes) exceed `ratio` of
/// its allocations (or of its bytes).
fn pass_diverged(c: &PassCounters, ratio: f64) -> bool {
    beyond(
        c.diverged(),
        c.allocations,
        c.diverged_bytes,
        c.slab_bytes + c.diverged_bytes,
        ratio,
    )
}

/// Whether a replayed pass diverged from its plan as a pass of another shape does:
/// beyond `ratio`, by [`OTHER_SHAPE_MISSES`] requests or more than half its bytes.
pub(crate) fn other_shape(c: &PassCounters, ratio: f64) -> bool {
    let all = c.slab_bytes + c.diverged_bytes;
    pass_diverged(c, ratio)
        && (c.diverged() >= OTHER_SHAPE_MISSES || over(c.diverged_bytes, all, FAILING_RATIO))
}

/// What a window's passes say about the key's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep replaying: the window is not full, or the divergence did not persist.
    Keep,
    /// The divergence persisted: profile again (rate-limited by the key).
    Diverged,
    /// The divergence persisted and the plan fails (see [`FAILING_RATIO`]): profile again,
    /// whatever the rate limit.
    Failing,
}

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
    /// Slab hits of the window's passes.
    hits: plain::AtomicU64,
    passes: plain::AtomicU32,
    /// Consecutive windows that diverged.
    streak: plain::AtomicU32,
    /// Of those, the consecutive windows that failed.
    failing: plain::AtomicU32,
    /// A pass replayed the plan within the ratio since the window restarted.
    fitted: plain::AtomicBool,
}

impl Divergence {
    /// Adds a replayed pass's counters `c` to the window and says what the window's
    /// passes make of the plan, once `window` passes are in: the divergence persists when
    /// [`DIVERGED_WINDOWS`] windows in a row saw the misses that say the program diverged
    /// exceed `ratio` of the allocations or of the bytes. A thread's first pass making
    /// allocations of its own, or any other one-off, does not re-profile the key.
    ///
    /// One such window is enough when the planned slots its passes skipped alone exceed
    /// `ratio` of the allocations: the profiled pass made allocations that the passes
    /// after it do not (a process's first pass building lazy state). A one-off of a
    /// replayed pass adds allocations rather than dropping planned ones, so this does not
    /// come from one pass, and the plan converges after one window instead of two. For
    /// the key's first plan (`first_plan`: its first profile's, a plan nothing was
    /// merged into) that no pass has fitted yet, one pass that skipped that many is the
    /// window: that is the plan with a first pass's lazy state in it, and its second
    /// profile then comes one replayed pass after it, not a window later. (A pass cut
    /// short skips nothing: skipping is re-synchronising past planned slots. A later
    /// plan waits for its window: one merged from profiles of a growing shape, whose
    /// growth the window's passes let the next profile see.) One
    /// window is enough too when none of its passes was served a single block: the plan
    /// serves nothing; and when no pass has replayed the plan within `ratio` since it was
    /// published: nothing says the plan's shape recurs (a decoding loop's prefill, whose
    /// steps replay it), so one window of evidence against it is enough. A plan some pass
    /// fitted is the plan of a shape that recurs, and a window of other shapes mixed in
    /// does not re-profile it alone.
    ///
    /// The verdict is [`Verdict::Failing`] when each window of the streak also missed
    /// more than [`FAILING_RATIO`] of its allocations. So a key whose replayed passes keep
    /// missing more than half of what they ask is profiled again at most
    /// `DIVERGED_WINDOWS * window` replayed passes after its plan was published or
    /// loaded (its next pass profiles), whatever the plan came from.
    pub(crate) fn note(
        &self,
        c: &PassCounters,
        window: u32,
        ratio: f64,
        first_plan: bool,
    ) -> Verdict {
        let r = Ordering::Relaxed;
        let allocs = self.allocs.fetch_add(c.allocations, r) + c.allocations;
        let misses = self.misses.fetch_add(c.diverged(), r) + c.diverged();
        let all = c.slab_bytes + c.diverged_bytes;
        let bytes = self.bytes.fetch_add(all, r) + all;
        let dbytes = self.diverged_bytes.fetch_add(c.diverged_bytes, r) + c.diverged_bytes;
        let skipped = self.skipped.fetch_add(c.skipped, r) + c.skipped;
        let hits = self.hits.fetch_add(c.slab_hits, r) + c.slab_hits;
        let passes = self.passes.fetch_add(1, r) + 1;
        if c.slab_hits > 0 && !pass_diverged(c, ratio) {
            self.fitted.store(true, r);
        }
        let decided_alone =
            first_plan && !self.fitted.load(r) && over(c.skipped, c.allocations, ratio);
        if passes < window && !decided_alone {
            return Verdict::Keep;
        }
        self.clear();
        let diverged = allocs > 0 && beyond(misses, allocs, dbytes, bytes, ratio);
        if !diverged {
            self.streak.store(0, r);
            self.failing.store(0, r);
            return Verdict::Keep;
        }
        let streak = self.streak.fetch_add(1, r) + 1;
        let failing = if over(misses, allocs, FAILING_RATIO) {
            self.failing.fetch_add(1, r) + 1
        } else {
            self.failing.store(0, r);
            0
        };
        let needed = if over(skipped, allocs, ratio) || hits == 0 || !self.fitted.load(r) {
            1
        } else {
            DIVERGED_WINDOWS
        };
        if streak < needed {
            Verdict::Keep
        } else if failing >= needed {
            Verdict::Failing
        } else {
            Verdict::Diverged
        }
    }

    /// Whether a pass replayed the plan within the ratio since the window restarted.
    pub(crate) fn fitted(&self) -> bool {
        self.fitted.load(Ordering::Relaxed)
    }

    /// Empties the window (its streak stays).
    fn clear(&self) {
        let r = Ordering::Relaxed;
        self.allocs.store(0, r);
        self.misses.store(0, r);
        self.bytes.store(0, r);
        self.diverged_bytes.store(0, r);
        self.skipped.store(0, r);
        self.hits.store(0, r);
        self.passes.store(0, r);
    }

    /// A new plan starts a new window, with no streak, not fitted by any pass yet.
    pub(crate) fn restart(&self) {
        self.clear();
        self.streak.store(0, Ordering::Relaxed);
        self.failing.store(0, Ordering::Relaxed);
        self.fitted.store(false, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A replayed pass of 100 allocations, `missed` of them missed as diverged.
    fn pass(missed: u64) -> PassCounters {
        let mut c = PassCounters {
            allocations: 100,
            slab_hits: 100 - missed,
            slab_bytes: 64 * (100 - missed),
            ..PassCounters::default()
        };
        c.misses[crate::stats::MissReason::Unplanned as usize] = missed;
        c.diverged_bytes = 64 * missed;
        c
    }

    /// The verdicts after each of `passes`, windows of 3, ratio 5%, for a plan an
    /// earlier pass fitted.
    fn verdicts(passes: &[u64]) -> Vec<Verdict> {
        let d = Divergence::default();
        d.fitted.store(true, Ordering::Relaxed);
        passes
            .iter()
            .map(|&m| d.note(&pass(m), 3, 0.05, false))
            .collect()
    }

    #[test]
    fn a_plan_no_pass_fitted_is_profiled_again_after_one_diverged_window() {
        use Verdict::*;
        let unfitted = |passes: &[u64]| {
            let d = Divergence::default();
            let v: Vec<Verdict> = passes
                .iter()
                .map(|&m| d.note(&pass(m), 3, 0.05, false))
                .collect();
            v
        };
        assert_eq!(unfitted(&[10, 10, 10]), [Keep, Keep, Diverged]);
        assert_eq!(unfitted(&[60, 60, 60]), [Keep, Keep, Failing]);
        // One pass within the ratio fits it: two windows, as for any plan.
        assert_eq!(
            unfitted(&[10, 2, 10, 10, 10, 10]),
            [Keep, Keep, Keep, Keep, Keep, Diverged]
        );
        // A new plan must be fitted again.
        let d = Divergence::default();
        d.note(&pass(0), 3, 0.05, false);
        d.restart();
        let v: Vec<Verdict> = [10, 10, 10]
            .iter()
            .map(|&m| d.note(&pass(m), 3, 0.05, false))
            .collect();
        assert_eq!(v, [Keep, Keep, Diverged]);
    }

    /// A replayed pass of 100 allocations, all served, that re-synchronised past
    /// `skipped` planned slots.
    fn skipping(skipped: u64) -> PassCounters {
        PassCounters {
            allocations: 100,
            slab_hits: 100,
            slab_bytes: 6400,
            skipped,
            ..PassCounters::default()
        }
    }

    #[test]
    fn one_pass_skipping_a_first_plan_no_pass_fitted_re_profiles_it() {
        use Verdict::*;
        let notes = |d: &Divergence, first_plan: bool, skips: &[u64]| -> Vec<Verdict> {
            skips
                .iter()
                .map(|&s| d.note(&skipping(s), 3, 0.05, first_plan))
                .collect()
        };
        let d = Divergence::default();
        assert_eq!(notes(&d, true, &[30]), [Diverged]);
        // The verdict empties the window: the next passes start a window of their own.
        assert_eq!(notes(&d, true, &[0, 0, 0]), [Keep, Keep, Keep]);
        // Skipping within the ratio waits for the window.
        let within = Divergence::default();
        assert_eq!(notes(&within, true, &[4, 4, 4]), [Keep, Keep, Keep]);
        // A plan some pass fitted is judged on whole windows: one of them, as the
        // skipped slots say the profile made allocations its replays do not.
        let fitted = Divergence::default();
        fitted.fitted.store(true, Ordering::Relaxed);
        assert_eq!(notes(&fitted, true, &[30, 30, 30]), [Keep, Keep, Diverged]);
        // A later plan (a merge of profiles) is judged on its window too.
        let later = Divergence::default();
        assert_eq!(notes(&later, false, &[30, 30, 30]), [Keep, Keep, Diverged]);
    }

    #[test]
    fn a_pass_of_another_shape_misses_more_than_a_few_probes() {
        assert!(other_shape(&pass(20), 0.05));
        // Beyond the ratio, but a few misses only (a smaller shape's probes).
        assert!(pass_diverged(&pass(8), 0.05));
        assert!(!other_shape(&pass(8), 0.05));
        assert!(!other_shape(&pass(2), 0.05));
        // A few requests that hold most of the pass's bytes.
        let mut large = pass(2);
        large.diverged_bytes = 64 * 200;
        assert!(other_shape(&large, 0.05));
    }

    #[test]
    fn divergence_that_persists_two_windows_re_profiles() {
        use Verdict::*;
        assert_eq!(
            verdicts(&[10, 10, 10, 10, 10, 10]),
            [Keep, Keep, Keep, Keep, Keep, Diverged]
        );
        // A window in step in between starts the streak again.
        assert_eq!(verdicts(&[10, 10, 10, 0, 0, 0, 10, 10, 10]), [Keep; 9]);
    }

    #[test]
    fn a_plan_missing_most_requests_fails_and_one_serving_nothing_fails_in_one_window() {
        use Verdict::*;
        assert_eq!(
            verdicts(&[60, 60, 60, 60, 60, 60]),
            [Keep, Keep, Keep, Keep, Keep, Failing]
        );
        assert_eq!(verdicts(&[100, 100, 100]), [Keep, Keep, Failing]);
        // Failing windows after a merely diverged one: failing once the streak of
        // failing windows is long enough on its own.
        assert_eq!(
            verdicts(&[10, 10, 10, 60, 60, 60, 60, 60, 60]),
            [Keep, Keep, Keep, Keep, Keep, Diverged, Keep, Keep, Failing]
        );
    }
}
