//! The plan registry: pass key -> entry, and each key's life as a state machine.
//!
//! # The state machine
//! A key's state and its plan are one word ([`KeyState`], a tag in the low bits of the
//! plan pointer), changed only by [`KeyEntry::transition`], one CAS from an expected
//! state to the next. So "planned without a plan" cannot be written, and a publication
//! racing an eviction cannot be lost: whichever CAS comes second fails and looks again.
//!
//! ```text
//!             begin_profile                 publish(q)
//!  Unplanned ───────────────> Profiling(-) ────────────> Planned(q) <──┐
//!      ^  <──────────────────────  │ abandon                │  │       │ abandon
//!      │                                                    │  │ mark_stale
//!      │ evict                       evict                  │  v       │
//!      └─────────────────────────────────────────────────── Stale(q) ──┤
//!                                                             │ begin_profile
//!                                        Profiling(q) <───────┘       │
//!                                          │ publish(r): Planned(r)   │
//!                                          │ evict: Profiling(-)  ────┘
//! ```
//!
//! While a key is re-profiled (`Profiling(q)`), other passes keep replaying `q`.
//!
//! Which keys keep plans (admission, eviction) is decided in `cache.rs`.
//!
//! Lookups are lock-free: a fixed open-addressing table of entries that are never
//! removed (a process has few distinct keys; past [`MAX_KEYS`] a pass runs on the
//! backend).

use std::ptr;

use crate::registry::reclaim::{ReadGuard, Readers, Reclaimer};
use crate::replay::slab::pool::Slabs;
use crate::stats::{PassCounters, GLOBAL, MISS_REASONS};
use crate::support::fallible::try_box;
use crate::support::hash::FastHasher;
use crate::support::sync::{plain, AtomicUsize, LockId, Ordering, SpinCell, SpinLock};

/// Most distinct keys.
pub(crate) const MAX_KEYS: usize = 4096;

/// A key's state (**the** state machine; see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyState {
    /// No plan; the next admitted pass profiles.
    Unplanned,
    /// A pass is recording; the plan it will replace, if any, is still replayed.
    Profiling(*mut Slabs),
    /// Passes replay the plan.
    Planned(*mut Slabs),
    /// Replays of the plan diverged: the next pass re-profiles (others keep replaying).
    Stale(*mut Slabs),
}

const TAG_BITS: usize = 2;
const TAG_MASK: usize = (1 << TAG_BITS) - 1;

impl KeyState {
    fn encode(self) -> usize {
        let (ptr, tag) = match self {
            KeyState::Unplanned => (ptr::null_mut(), 0),
            KeyState::Profiling(p) => (p, 1),
            KeyState::Planned(p) => (p, 2),
            KeyState::Stale(p) => (p, 3),
        };
        debug_assert_eq!(ptr as usize & TAG_MASK, 0, "plans are aligned");
        ptr as usize | tag
    }

    fn decode(word: usize) -> KeyState {
        let p = (word & !TAG_MASK) as *mut Slabs;
        match word & TAG_MASK {
            0 => KeyState::Unplanned,
            1 => KeyState::Profiling(p),
            2 => KeyState::Planned(p),
            _ => KeyState::Stale(p),
        }
    }

    /// The plan this state holds, or null.
    pub(crate) fn plan(self) -> *mut Slabs {
        match self {
            KeyState::Unplanned => ptr::null_mut(),
            KeyState::Profiling(p) | KeyState::Planned(p) | KeyState::Stale(p) => p,
        }
    }

    /// Name in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            KeyState::Unplanned => "unplanned",
            KeyState::Profiling(_) => "profiling",
            KeyState::Planned(_) => "planned",
            KeyState::Stale(_) => "replan",
        }
    }
}

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

pub(crate) struct KeyEntry {
    pub(crate) key: Box<str>,
    hash: u64,
    /// The [`KeyState`] word.
    state: AtomicUsize,
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
    window_allocs: plain::AtomicU64,
    window_misses: plain::AtomicU64,
    window_bytes: plain::AtomicU64,
    window_diverged_bytes: plain::AtomicU64,
    /// Planned slots the window's passes skipped (see [`KeyEntry::note_divergence`]).
    window_skipped: plain::AtomicU64,
    window_passes: plain::AtomicU32,
    /// Consecutive windows that diverged.
    diverged_windows: plain::AtomicU32,
    pub(crate) counters: KeyCounters,
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

static TABLE: [plain::AtomicPtr<KeyEntry>; MAX_KEYS] =
    [const { plain::AtomicPtr::new(ptr::null_mut()) }; MAX_KEYS];
/// Guards entry creation.
pub(crate) static INSERT: SpinCell<()> = SpinCell::new(LockId::Registry, ());
/// Pass starts so far: the clock of recency and of frequency aging.
static CLOCK: plain::AtomicU64 = plain::AtomicU64::new(1);

/// The pass clock: pass starts so far.
pub(crate) fn now() -> u64 {
    CLOCK.load(Ordering::Relaxed)
}
/// Churn was warned about.
static CHURN_WARNED: plain::AtomicBool = plain::AtomicBool::new(false);

fn hash_key(key: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = FastHasher::default();
    h.write(key.as_bytes());
    h.finish()
}

/// The entry of `key`, if it exists.
pub(crate) fn find(key: &str) -> Option<&'static KeyEntry> {
    let hash = hash_key(key);
    let mut i = hash as usize % MAX_KEYS;
    for _ in 0..MAX_KEYS {
        let e = TABLE[i].load(Ordering::Acquire);
        if e.is_null() {
            return None;
        }
        // SAFETY: entries are leaked on insertion and never freed.
        let e = unsafe { &*e };
        if e.hash == hash && &*e.key == key {
            return Some(e);
        }
        i = (i + 1) % MAX_KEYS;
    }
    None
}

/// The entry of `key`, created if needed (with the re-entrancy guard set); `None` when
/// the table is full or memory ran out.
pub(crate) fn entry(key: &str) -> Option<&'static KeyEntry> {
    if let Some(e) = find(key) {
        return Some(e);
    }
    INSERT.with(|()| {
        if let Some(e) = find(key) {
            return Some(e);
        }
        let hash = hash_key(key);
        let mut i = hash as usize % MAX_KEYS;
        for _ in 0..MAX_KEYS {
            if TABLE[i].load(Ordering::Acquire).is_null() {
                let e: &'static KeyEntry = Box::leak(KeyEntry::new(key, hash)?);
                TABLE[i].store(e as *const _ as *mut _, Ordering::Release);
                return Some(e);
            }
            i = (i + 1) % MAX_KEYS;
        }
        None
    })
}

/// Calls `f` for every entry.
pub(crate) fn for_each(mut f: impl FnMut(&'static KeyEntry)) {
    for slot in &TABLE {
        let e = slot.load(Ordering::Acquire);
        if !e.is_null() {
            // SAFETY: entries are leaked and never freed.
            f(unsafe { &*e });
        }
    }
}

impl KeyEntry {
    /// A new entry; `None` when memory ran out.
    pub(crate) fn new(key: &str, hash: u64) -> Option<Box<KeyEntry>> {
        let mut name = String::new();
        name.try_reserve_exact(key.len()).ok()?;
        name.push_str(key);
        try_box(KeyEntry {
            key: name.into_boxed_str(),
            hash,
            state: AtomicUsize::new(KeyState::Unplanned.encode()),
            readers: Readers::new(),
            freq: plain::AtomicU32::new(0),
            last_used: plain::AtomicU64::new(0),
            evicted_at: plain::AtomicU64::new(0),
            backoff_until: plain::AtomicU64::new(0),
            backoffs: plain::AtomicU32::new(0),
            window_allocs: plain::AtomicU64::new(0),
            window_misses: plain::AtomicU64::new(0),
            window_bytes: plain::AtomicU64::new(0),
            window_diverged_bytes: plain::AtomicU64::new(0),
            window_skipped: plain::AtomicU64::new(0),
            window_passes: plain::AtomicU32::new(0),
            diverged_windows: plain::AtomicU32::new(0),
            counters: KeyCounters::default(),
            summary: std::cell::UnsafeCell::new(None),
        })
    }

    /// The current state.
    pub(crate) fn state(&self) -> KeyState {
        KeyState::decode(self.state.load(Ordering::Acquire))
    }

    /// The one place the state changes: `from -> to` in one CAS; `false` (and no change)
    /// if the state is not `from`.
    fn transition(&self, from: KeyState, to: KeyState) -> bool {
        self.state
            .compare_exchange(
                from.encode(),
                to.encode(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// `Unplanned -> Profiling(-)` or `Stale(p) -> Profiling(p)`: this pass profiles.
    pub(crate) fn begin_profile(&self) -> bool {
        match self.state() {
            from @ KeyState::Unplanned => {
                self.transition(from, KeyState::Profiling(ptr::null_mut()))
            }
            from @ KeyState::Stale(p) => self.transition(from, KeyState::Profiling(p)),
            _ => false,
        }
    }

    /// `Profiling(p) -> Planned(new)`, retiring `p`. Returns `new` back if the key is
    /// not being profiled (it cannot happen: only the profiling pass publishes).
    ///
    /// # Safety
    /// `new` came from `Box::into_raw` and is owned by the caller.
    pub(crate) unsafe fn publish(
        &'static self,
        new: *mut Slabs,
        reclaimer: &Reclaimer,
    ) -> Result<(), *mut Slabs> {
        loop {
            let from = self.state();
            let KeyState::Profiling(old) = from else {
                return Err(new);
            };
            if self.transition(from, KeyState::Planned(new)) {
                self.new_window();
                if !old.is_null() {
                    // SAFETY: `old` was this key's plan and no state refers to it now.
                    unsafe { reclaimer.retire(old, &self.readers) };
                }
                return Ok(());
            }
        }
    }

    /// A plan loaded from a file (before any pass of the key): `Unplanned -> Planned(new)`,
    /// or `Planned(p) -> Planned(new)` retiring `p` (a later file of the same key).
    ///
    /// # Safety
    /// `new` came from `Box::into_raw` and is given to the key.
    pub(crate) unsafe fn install(&'static self, new: *mut Slabs, reclaimer: &Reclaimer) {
        loop {
            let from = self.state();
            let old = match from {
                KeyState::Unplanned => ptr::null_mut(),
                KeyState::Planned(p) => p,
                // Only loaded at the first pass, before any profile: not reached.
                _ => {
                    // SAFETY: `new` is ours and unpublished.
                    drop(unsafe { Box::from_raw(new) });
                    return;
                }
            };
            if self.transition(from, KeyState::Planned(new)) {
                self.new_window();
                if !old.is_null() {
                    // SAFETY: `old` was this key's plan and no state refers to it now.
                    unsafe { reclaimer.retire(old, &self.readers) };
                }
                return;
            }
        }
    }

    /// A profile given up: `Profiling(p) -> Planned(p)`, or `-> Unplanned` without a plan.
    pub(crate) fn abandon_profile(&self) {
        loop {
            let from = self.state();
            let KeyState::Profiling(p) = from else { return };
            let to = if p.is_null() {
                KeyState::Unplanned
            } else {
                KeyState::Planned(p)
            };
            if self.transition(from, to) {
                return;
            }
        }
    }

    /// `Planned(p) -> Stale(p)`: replays of `p` diverged.
    pub(crate) fn mark_stale(&self, p: *mut Slabs) -> bool {
        self.transition(KeyState::Planned(p), KeyState::Stale(p))
    }

    /// Takes the plan out of the key (`Planned(p)`/`Stale(p) -> Unplanned`,
    /// `Profiling(p) -> Profiling(-)`) and retires it. `false` if the key had no plan.
    pub(crate) fn evict(&'static self, reclaimer: &Reclaimer) -> bool {
        loop {
            let from = self.state();
            let to = match from {
                KeyState::Planned(_) | KeyState::Stale(_) => KeyState::Unplanned,
                KeyState::Profiling(p) if !p.is_null() => KeyState::Profiling(ptr::null_mut()),
                _ => return false,
            };
            if self.transition(from, to) {
                // SAFETY: the plan was this key's and no state refers to it now.
                unsafe { reclaimer.retire(from.plan(), &self.readers) };
                self.evicted_at.store(now().max(1), Ordering::Relaxed);
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
                GLOBAL.evictions.fetch_add(1, Ordering::Relaxed);
                return true;
            }
        }
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

    /// Adds a pass that replayed `plan` to the divergence window; returns `true` when the
    /// key's divergence persists: [`DIVERGED_WINDOWS`] windows of `window` passes in a row
    /// in which the misses that say the program diverged exceed `ratio` of the allocations
    /// or of the bytes. A thread's first pass making allocations of its own, or any other
    /// one-off, does not re-profile the key.
    ///
    /// The window belongs to the key's current plan: a pass of any other plan (one that
    /// is being re-profiled, or was replaced while the pass ran) is not counted, and
    /// publishing a plan starts a new window. Passes that replay the old plan while its
    /// successor is planned still diverge as it did; counted, they made the new plan's
    /// first window look diverged and profiled the key once more. (A pass that read the
    /// old plan as current just before the new one was published can still add itself
    /// to the new window: one pass among `window`, never a streak.)
    ///
    /// One such window is enough when the planned slots its passes skipped alone exceed
    /// `ratio` of the allocations: the profiled pass made allocations that the passes
    /// after it do not (a process's first forward building lazy state). A one-off of a
    /// replayed pass adds allocations rather than dropping planned ones, so this does not
    /// come from one pass, and the plan converges after one window instead of two.
    pub(crate) fn note_divergence(
        &self,
        plan: *mut Slabs,
        c: &PassCounters,
        window: u32,
        ratio: f64,
    ) -> bool {
        if self.state() != KeyState::Planned(plan) {
            return false;
        }
        let r = Ordering::Relaxed;
        let allocs = self.window_allocs.fetch_add(c.allocations, r) + c.allocations;
        let misses = self.window_misses.fetch_add(c.diverged(), r) + c.diverged();
        let all = c.slab_bytes + c.diverged_bytes;
        let bytes = self.window_bytes.fetch_add(all, r) + all;
        let dbytes = self.window_diverged_bytes.fetch_add(c.diverged_bytes, r) + c.diverged_bytes;
        let skipped = self.window_skipped.fetch_add(c.skipped, r) + c.skipped;
        let passes = self.window_passes.fetch_add(1, r) + 1;
        if passes < window {
            return false;
        }
        self.clear_window();
        let over = |n: u64, of: u64| n as f64 > ratio * of as f64;
        let diverged = allocs > 0 && (over(misses, allocs) || over(dbytes, bytes));
        if !diverged {
            self.diverged_windows.store(0, r);
            return false;
        }
        let streak = self.diverged_windows.fetch_add(1, r) + 1;
        let needed = if over(skipped, allocs) {
            1
        } else {
            DIVERGED_WINDOWS
        };
        // Re-profiling is rate-limited: at most 8 times per key.
        streak >= needed && self.counters.replans.load(r) < 8
    }

    /// Empties the divergence window (its streak stays).
    fn clear_window(&self) {
        let r = Ordering::Relaxed;
        self.window_allocs.store(0, r);
        self.window_misses.store(0, r);
        self.window_bytes.store(0, r);
        self.window_diverged_bytes.store(0, r);
        self.window_skipped.store(0, r);
        self.window_passes.store(0, r);
    }

    /// A new plan starts a new divergence window, with no streak.
    fn new_window(&self) {
        self.clear_window();
        self.diverged_windows.store(0, Ordering::Relaxed);
    }
}

/// Consecutive diverged windows that re-profile a key.
pub(crate) const DIVERGED_WINDOWS: u32 = 2;

/// Lends the blocks of every plan's idle instances that wait to (see `Slabs::lend_idle`).
/// Runs at a pass boundary, with the re-entrancy guard set.
pub(crate) fn lend_idle_blocks() {
    for_each(|e| {
        let (_guard, s) = e.read();
        if !s.is_null() {
            // SAFETY: the read guard keeps a published plan from being freed.
            unsafe { &*s }.lend_idle();
        }
    });
}

/// Plans kept, their instances and pinned instances, and resident bytes, over all keys.
pub(crate) fn totals() -> (u64, u64, u64, u64) {
    let (mut plans, mut slabs, mut pinned, mut bytes) = (0, 0, 0, 0);
    for_each(|e| {
        let (_guard, s) = e.read();
        if !s.is_null() {
            // SAFETY: the read guard keeps a published plan from being freed.
            let s = unsafe { &*s };
            plans += 1;
            slabs += s.instances() as u64;
            pinned += s.pinned() as u64;
            bytes += s.resident_bytes();
        }
    });
    (plans, slabs, pinned, bytes)
}
