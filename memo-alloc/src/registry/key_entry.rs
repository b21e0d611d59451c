//! A key's entry in the registry: its name, its state and plan (`key_state.rs`), how
//! often it is used (for the cache), its backoff after abandoned profiles, its
//! divergence window, its counters and the summary of its last profile.

use crate::registry::classes::{Classes, Signature, MAX_CLASSES};
use crate::registry::divergence::{other_shape, Divergence, Verdict};
use crate::registry::key_state::{KeyState, StateWord};
use crate::registry::reclaim::{ReadGuard, Readers, Reclaimer};
use crate::replay::slab::pool::Slabs;
use crate::stats::{PassCounters, GLOBAL, MISS_REASONS};
use crate::support::fallible::try_box;
use crate::support::sync::{plain, AtomicPtr, LockId, Ordering, SpinLock};

/// What the last profiled pass of a key looked like.
#[derive(Clone, Debug, Default)]
pub(crate) struct Summary {
    pub(crate) allocations: u64,
    pub(crate) planned: u64,
    pub(crate) escaping: u64,
    pub(crate) lane_requests: u64,
    pub(crate) lane_bytes: u64,
    pub(crate) reallocs: u64,
    pub(crate) events: u64,
    pub(crate) scopes: u64,
    pub(crate) height: u64,
    pub(crate) lower_bound: u64,
    pub(crate) naive: u64,
    pub(crate) strategy: String,
    pub(crate) plan_millis: f64,
}

/// Counters of a key (relaxed; reports only).
#[derive(Default)]
pub(crate) struct KeyCounters {
    pub(crate) passes_profiled: plain::AtomicU64,
    pub(crate) passes_replayed: plain::AtomicU64,
    pub(crate) passes_backend: plain::AtomicU64,
    pub(crate) slab_hits: plain::AtomicU64,
    pub(crate) misses: [plain::AtomicU64; MISS_REASONS],
    pub(crate) profiles_abandoned: plain::AtomicU64,
    pub(crate) replays_abandoned: plain::AtomicU64,
    pub(crate) evictions: plain::AtomicU64,
    pub(crate) admissions_refused: plain::AtomicU64,
    pub(crate) replans: plain::AtomicU64,
}

/// One pass key (see the module documentation).
pub(crate) struct KeyEntry {
    pub(crate) key: Box<str>,
    pub(super) hash: u64,
    /// The key's state and plan.
    state: StateWord,
    pub(crate) readers: Readers,
    /// Passes started, halved periodically (admission).
    freq: plain::AtomicU32,
    /// Last pass start (ties in eviction).
    last_used: plain::AtomicU64,
    /// The pass clock when the key's plan was last evicted (0: never).
    evicted_at: plain::AtomicU64,
    /// No profile before this pass tick (after an abandoned one).
    backoff_until: plain::AtomicU64,
    backoffs: plain::AtomicU32,
    /// Whether the current plan's replays diverge.
    divergence: Divergence,
    pub(crate) counters: KeyCounters,
    /// Its shape classes (see `classes.rs`).
    pub(crate) classes: Classes,
    /// The entries of its classes beyond its own (see `class_table.rs`).
    pub(crate) class_entries: [AtomicPtr<KeyEntry>; MAX_CLASSES],
    /// Behind [`SUMMARIES`].
    summary: std::cell::UnsafeCell<Option<Summary>>,
}

// SAFETY: `summary` is only reached through `KeyEntry::summary`, under `SUMMARIES`; every
// other field is atomic or immutable.
unsafe impl Sync for KeyEntry {}
// SAFETY: as above.
unsafe impl Send for KeyEntry {}

/// Guards every key's summary (pass ends and reports only).
pub(crate) static SUMMARIES: SpinLock = SpinLock::new(LockId::Summaries);

/// Pass starts so far: the clock of recency and of frequency aging.
static CLOCK: plain::AtomicU64 = plain::AtomicU64::new(1);

/// The pass clock: pass starts so far.
pub(crate) fn now() -> u64 {
    CLOCK.load(Ordering::Relaxed)
}

/// Churn was warned about.
static CHURN_WARNED: plain::AtomicBool = plain::AtomicBool::new(false);

impl KeyEntry {
    /// A new entry; `None` when memory ran out.
    pub(crate) fn new(key: &str, hash: u64) -> Option<Box<KeyEntry>> {
        let mut name = String::new();
        name.try_reserve_exact(key.len()).ok()?;
        name.push_str(key);
        try_box(KeyEntry {
            key: name.into_boxed_str(),
            hash,
            state: StateWord::new(),
            readers: Readers::new(),
            freq: plain::AtomicU32::new(0),
            last_used: plain::AtomicU64::new(0),
            evicted_at: plain::AtomicU64::new(0),
            backoff_until: plain::AtomicU64::new(0),
            backoffs: plain::AtomicU32::new(0),
            divergence: Divergence::default(),
            counters: KeyCounters::default(),
            classes: Classes::default(),
            class_entries: Default::default(),
            summary: std::cell::UnsafeCell::new(None),
        })
    }

    /// The current state.
    pub(crate) fn state(&self) -> KeyState {
        self.state.get()
    }

    /// See [`StateWord::begin_profile`].
    pub(crate) fn begin_profile(&self) -> bool {
        self.state.begin_profile()
    }

    /// Publishes `new` ([`StateWord::publish`]): the plan it replaces is retired, and the
    /// divergence window starts afresh. Returns `new` back if the key is not being
    /// profiled.
    ///
    /// # Safety
    /// `new` came from `Box::into_raw` and is owned by the caller.
    pub(crate) unsafe fn publish(
        &'static self,
        new: *mut Slabs,
        reclaimer: &Reclaimer,
    ) -> Result<(), *mut Slabs> {
        let old = self.state.publish(new)?;
        self.divergence.restart();
        if !old.is_null() {
            // SAFETY: `old` was this key's plan and no state refers to it now.
            unsafe { reclaimer.retire(old, &self.readers) };
        }
        Ok(())
    }

    /// Installs `new`, loaded from a file ([`StateWord::install`]): the plan it replaces
    /// is retired, and the divergence window starts afresh. In a state that takes no
    /// file's plan, `new` is dropped.
    ///
    /// # Safety
    /// `new` came from `Box::into_raw` and is given to the key.
    pub(crate) unsafe fn install(&'static self, new: *mut Slabs, reclaimer: &Reclaimer) {
        match self.state.install(new) {
            Ok(old) => {
                self.divergence.restart();
                if !old.is_null() {
                    // SAFETY: `old` was this key's plan and no state refers to it now.
                    unsafe { reclaimer.retire(old, &self.readers) };
                }
            }
            // SAFETY: `new` is ours and unpublished.
            Err(new) => drop(unsafe { Box::from_raw(new) }),
        }
    }

    /// See [`StateWord::abandon_profile`].
    pub(crate) fn abandon_profile(&self) {
        self.state.abandon_profile();
    }

    /// See [`StateWord::mark_stale`].
    pub(crate) fn mark_stale(&self, p: *mut Slabs) -> bool {
        self.state.mark_stale(p)
    }

    /// Takes the plan out of the key ([`StateWord::evict`]) and retires it, counted as an
    /// eviction. `false` if the key had no plan.
    pub(crate) fn evict(&'static self, reclaimer: &Reclaimer) -> bool {
        let Some(old) = self.state.evict() else {
            return false;
        };
        // SAFETY: the plan was this key's and no state refers to it now.
        unsafe { reclaimer.retire(old, &self.readers) };
        self.evicted_at.store(now().max(1), Ordering::Relaxed);
        self.counters.evictions.fetch_add(1, Ordering::Relaxed);
        GLOBAL.evictions.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Enters the key's readers and loads its plan: while the guard lives, the plan
    /// (if any) is not freed.
    pub(crate) fn read(&self) -> (ReadGuard<'_>, *mut Slabs) {
        let g = self.readers.enter();
        (g, self.state().plan())
    }

    /// Notes a pass start (frequency and recency).
    pub(crate) fn touch(&self) {
        let now = CLOCK.fetch_add(1, Ordering::Relaxed);
        self.last_used.store(now, Ordering::Relaxed);
        self.freq.fetch_add(1, Ordering::Relaxed);
    }

    /// Passes started lately (halved periodically by `cache::age`).
    pub(crate) fn freq(&self) -> u32 {
        self.freq.load(Ordering::Relaxed)
    }

    /// Halves [`KeyEntry::freq`].
    pub(crate) fn halve_freq(&self) {
        self.freq.store(self.freq() / 2, Ordering::Relaxed);
    }

    /// The pass clock at the key's last pass start.
    pub(crate) fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    pub(crate) fn has_plan(&self) -> bool {
        !self.state().plan().is_null()
    }

    /// Whether this entry is a key whose passes are classified by shape, or one of its
    /// classes: its bound passes share one slab block with the key's other classes (see
    /// `memory::blocks`).
    pub(crate) fn has_shape_classes(&self) -> bool {
        self.classes.is_class() || self.classes.classed()
    }

    /// Whether a profile may start now (not backing off after an abandoned one).
    pub(crate) fn may_profile(&self) -> bool {
        CLOCK.load(Ordering::Relaxed) >= self.backoff_until.load(Ordering::Relaxed)
    }

    /// After an abandoned profile: no profile for 2^k (k-th time, at most 2^16) passes.
    pub(crate) fn back_off(&self) {
        let k = self.backoffs.fetch_add(1, Ordering::Relaxed).min(16);
        let until = CLOCK.load(Ordering::Relaxed) + (1u64 << k);
        self.backoff_until.store(until, Ordering::Relaxed);
    }

    /// Pass starts since the key's plan was last evicted (`None`: never evicted).
    pub(crate) fn since_eviction(&self) -> Option<u64> {
        match self.evicted_at.load(Ordering::Relaxed) {
            0 => None,
            at => Some(now().saturating_sub(at)),
        }
    }

    /// Notes a profile start: counts churn when the key's plan had been evicted.
    pub(crate) fn note_profile(&self, max_plans: usize) {
        if let KeyState::Profiling(p) = self.state() {
            if !p.is_null() {
                self.counters.replans.fetch_add(1, Ordering::Relaxed);
            }
        }
        if self.evicted_at.swap(0, Ordering::Relaxed) != 0 {
            let churn = GLOBAL.churn.fetch_add(1, Ordering::Relaxed) + 1;
            if churn >= 2 * max_plans as u64 && !CHURN_WARNED.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "memomalloc: pass keys keep evicting each other's plans ({churn} re-profiles \
                     of evicted keys); more keys are in use than MEMO_MAX_PLANS={max_plans} holds"
                );
            }
        }
    }

    /// Runs `f` on the key's last profile summary (under [`SUMMARIES`]).
    pub(crate) fn summary<R>(&self, f: impl FnOnce(&mut Option<Summary>) -> R) -> R {
        let _g = SUMMARIES.lock();
        // SAFETY: the lock is held for the whole access.
        f(unsafe { &mut *self.summary.get() })
    }

    /// Adds a replayed pass's counts to the key's.
    pub(crate) fn count_replay(&self, c: &PassCounters) {
        crate::stats::add(&self.counters.passes_replayed, 1);
        crate::stats::add(&self.counters.slab_hits, c.slab_hits);
        for (g, &m) in self.counters.misses.iter().zip(&c.misses) {
            crate::stats::add(g, m);
        }
    }

    /// Starts the key's divergence window afresh (see [`Divergence::restart`]).
    pub(crate) fn restart_window(&self) {
        self.divergence.restart();
    }

    /// Adds a pass that replayed `plan` to the key's divergence window (see
    /// [`Divergence::note`]); returns `true` when the key is to be profiled again.
    ///
    /// The window belongs to the key's current plan: a pass of any other plan (one that
    /// is being re-profiled, or was replaced while the pass ran) is not counted, and
    /// publishing a plan starts a new window. Passes that replay the old plan while its
    /// successor is planned still diverge as it did; counted, they would make the new
    /// plan's first window look diverged. (A pass that read the old plan as current just
    /// before the new one was published can still add itself to the new window: one pass
    /// among `window`, never a streak.) Re-profiling a plan that still serves most of its
    /// passes' requests is rate-limited to [`MAX_REPLANS`] times per key; a failing plan
    /// ([`Verdict::Failing`]) is profiled again whatever the count.
    fn note_divergence(&self, plan: *mut Slabs, c: &PassCounters, window: u32, ratio: f64) -> bool {
        if self.state() != KeyState::Planned(plan) {
            return false;
        }
        let r = Ordering::Relaxed;
        let first_plan = self.counters.replans.load(r) == 0 && self.counters.evictions.load(r) == 0;
        match self.divergence.note(c, window, ratio, first_plan) {
            Verdict::Keep => false,
            Verdict::Diverged => self.counters.replans.load(r) < MAX_REPLANS,
            Verdict::Failing => true,
        }
    }

    /// A replayed pass of `plan` ended with counters `c` and signature `s` (its first
    /// requests above the lane bound): whether it was of another shape than the plan and
    /// classified the key (see [`Classes::note_replay`]). It is when it replayed the
    /// key's current plan, which an earlier pass fitted, diverged from it as a pass of
    /// another shape does (beyond `ratio`: see [`other_shape`]), and its first large
    /// requests part from the plan's. Such a pass says nothing about
    /// the plan: it goes to no divergence window (the caller skips
    /// [`KeyEntry::note_replayed`]).
    pub(crate) fn note_replay_shape(
        &self,
        plan: *mut Slabs,
        c: &PassCounters,
        s: &Signature,
        ratio: f64,
        max_classes: usize,
    ) -> bool {
        let other = self.state() == KeyState::Planned(plan)
            && self.divergence.fitted()
            && other_shape(c, ratio);
        self.classes.note_replay(c, s, other, max_classes)
    }

    /// A replayed pass of `plan` ended: its counts go to the key's divergence window
    /// ([`KeyEntry::note_divergence`]), and the key is marked stale when they say so.
    /// Returns whether this marked it stale.
    ///
    /// The caller is still registered with `plan` (so `plan` cannot have been freed and
    /// another plan of the key allocated at its address: the loom model
    /// `failing_replay_racing_eviction_and_publication`).
    pub(crate) fn note_replayed(
        &self,
        plan: *mut Slabs,
        c: &PassCounters,
        window: u32,
        ratio: f64,
    ) -> bool {
        self.note_divergence(plan, c, window, ratio) && self.mark_stale(plan)
    }
}

/// Re-profiles of a key whose plan still serves most requests (see
/// [`KeyEntry::note_divergence`]).
pub(crate) const MAX_REPLANS: u64 = 8;
