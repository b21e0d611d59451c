//! Which keys keep plans: at most `Config::max_plans` do.
//!
//! Admission is frequency-aware (in the manner of TinyLFU): each key counts its passes,
//! the counts are halved periodically ([`age`]), and a key with no plan is profiled only
//! if there is room, or it is used more than the plan it would evict ([`admit`]). Idle
//! plans (unused for the last `2 * max_plans` pass starts) go first, then the least used
//! ([`victim`]), and a *new* key (never planned, or evicted before the last aging period)
//! may also take an idle plan's place. A key whose plan was evicted recently was not
//! reused within what the cache holds: profiling it again would only churn, so it must
//! out-use its victim.
//!
//! So under a cyclic access pattern over more keys than the cache holds, no plan is ever
//! idle and a working set of keys keeps its plans (plain LRU would evict every plan just
//! before its next use); a long tail of rarely used keys does not churn the cache; and
//! keys that replace a working set gone out of use are admitted at once.

use std::ptr;

use crate::registry::reclaim::RECLAIMER;
use crate::registry::{self, KeyEntry};

/// Whether `e`'s plan went unused for the last `2 * max_plans` pass starts.
fn idle(e: &KeyEntry, max_plans: usize) -> bool {
    registry::now().saturating_sub(e.last_used()) > 2 * max_plans as u64
}

/// The entry whose plan the cache would give up first (idle ones, oldest first; then the
/// least used, then the least recently used), among the keys holding a plan other than
/// `except`; and the number of keys holding a plan.
fn victim(except: &KeyEntry, max_plans: usize) -> (usize, Option<&'static KeyEntry>) {
    let mut planned = 0usize;
    let mut worst: Option<(&'static KeyEntry, (bool, u32, u64))> = None;
    registry::for_each(|e| {
        if !e.has_plan() {
            return;
        }
        planned += 1;
        if ptr::eq(except, e) {
            return;
        }
        let last = e.last_used();
        let rank = if idle(e, max_plans) {
            (false, 0, last)
        } else {
            (true, e.freq(), last)
        };
        if worst.is_none_or(|(_, w)| rank < w) {
            worst = Some((e, rank));
        }
    });
    (planned, worst.map(|(e, _)| e))
}

/// Whether `entry`, which has no plan, may be profiled with `max_plans` plans kept: a
/// free place, more use than the plan it would evict, or, for a new key, an idle plan
/// to evict.
pub(crate) fn admit(entry: &KeyEntry, max_plans: usize) -> bool {
    let (planned, worst) = victim(entry, max_plans);
    if planned < max_plans {
        return true;
    }
    let new = entry
        .since_eviction()
        .is_none_or(|t| t > aging_period(max_plans));
    worst.is_none_or(|w| entry.freq() > w.freq() || (new && idle(w, max_plans)))
}

/// Evicts plans beyond `max_plans`, in the order of [`victim`] (never `keep`, the one
/// just published).
pub(crate) fn evict_beyond(max_plans: usize, keep: &KeyEntry) {
    loop {
        let (planned, worst) = victim(keep, max_plans);
        let Some(victim) = worst.filter(|_| planned > max_plans) else {
            return;
        };
        victim.evict(&RECLAIMER);
    }
}

/// Pass starts between two halvings of the use counts; a key evicted within the last one
/// is not new (see [`admit`]).
pub(crate) fn aging_period(max_plans: usize) -> u64 {
    64 * max_plans as u64
}

/// Halves every key's use count once per `period` pass starts, so that a key's frequency
/// reflects recent use. Called at pass start.
pub(crate) fn age(period: u64) {
    if registry::now() % period.max(1) != 0 {
        return;
    }
    registry::for_each(KeyEntry::halve_freq);
}
