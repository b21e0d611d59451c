//! The plan registry: pass key -> state and published plan.
//!
//! Lookups are lock-free: a fixed open-addressing table of entries that are never
//! removed (a process has few distinct keys; past [`MAX_KEYS`] a pass runs on the backend).
//! A plan is published by swapping an atomic pointer. A replaced or evicted plan is retired
//! and freed only once (1) no pass is between loading the key's pointer and registering
//! with the plan (`entering == 0` seen after the swap), (2) no pass holds one of its
//! instances, and (3) none of its slots is live.

use std::ptr;

use crate::hash::FastHasher;
use crate::slab::Slabs;
use crate::stats::{PassCounters, MISS_REASONS};
use crate::sync::{fence, AtomicPtr, AtomicU32, AtomicU64, Ordering, SpinLock};

/// Most distinct keys.
pub(crate) const MAX_KEYS: usize = 4096;

/// Key states.
pub(crate) const UNPLANNED: u32 = 0;
pub(crate) const PROFILING: u32 = 1;
pub(crate) const PLANNED: u32 = 2;
pub(crate) const REPLAN: u32 = 3;

/// What the last profiled pass of a key looked like.
#[derive(Clone, Debug, Default)]
pub(crate) struct Summary {
    pub(crate) allocations: u64,
    pub(crate) planned: u64,
    pub(crate) escaping: u64,
    pub(crate) reallocs: u64,
    pub(crate) events: u64,
    pub(crate) scopes: u64,
    pub(crate) height: u64,
    pub(crate) lower_bound: u64,
    pub(crate) naive: u64,
    pub(crate) strategy: String,
    pub(crate) plan_millis: f64,
}

pub(crate) struct KeyEntry {
    pub(crate) key: Box<str>,
    hash: u64,
    pub(crate) state: AtomicU32,
    pub(crate) slabs: AtomicPtr<Slabs>,
    pub(crate) entering: AtomicU32,
    pub(crate) last_used: AtomicU64,
    pub(crate) replans: AtomicU32,
    window_allocs: AtomicU64,
    window_misses: AtomicU64,
    window_passes: AtomicU32,
    pub(crate) passes_profiled: AtomicU64,
    pub(crate) passes_replayed: AtomicU64,
    pub(crate) passes_backend: AtomicU64,
    pub(crate) slab_hits: AtomicU64,
    pub(crate) misses: [AtomicU64; MISS_REASONS],
    pub(crate) summary: SpinCell<Option<Summary>>,
}

/// A value behind the spin lock (pass boundaries only).
pub(crate) struct SpinCell<T> {
    lock: SpinLock,
    value: std::cell::UnsafeCell<T>,
}

// SAFETY: the value is only reached through `with`, which holds the lock.
unsafe impl<T: Send> Sync for SpinCell<T> {}

impl<T> SpinCell<T> {
    pub(crate) const fn new(value: T) -> SpinCell<T> {
        SpinCell {
            lock: SpinLock::new(),
            value: std::cell::UnsafeCell::new(value),
        }
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _g = self.lock.lock();
        // SAFETY: the lock is held for the whole access.
        f(unsafe { &mut *self.value.get() })
    }

    /// For the fork handlers only.
    pub(crate) fn lock_for_fork(&self) {
        self.lock.lock_for_fork();
    }

    /// For the fork handlers only.
    pub(crate) fn force_unlock(&self) {
        self.lock.force_unlock();
    }
}

static TABLE: [AtomicPtr<KeyEntry>; MAX_KEYS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_KEYS];
static INSERT: SpinLock = SpinLock::new();
static CLOCK: AtomicU64 = AtomicU64::new(1);

struct Retired {
    slabs: *mut Slabs,
    entry: &'static KeyEntry,
    quiescent: bool,
}

// SAFETY: `Retired` is only touched under `RETIRED`'s lock; the raw pointer is owned.
unsafe impl Send for Retired {}

static RETIRED: SpinCell<Vec<Retired>> = SpinCell::new(Vec::new());

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
/// the table is full.
pub(crate) fn entry(key: &str) -> Option<&'static KeyEntry> {
    if let Some(e) = find(key) {
        return Some(e);
    }
    let _g = INSERT.lock();
    if let Some(e) = find(key) {
        return Some(e);
    }
    let hash = hash_key(key);
    let mut i = hash as usize % MAX_KEYS;
    for _ in 0..MAX_KEYS {
        if TABLE[i].load(Ordering::Acquire).is_null() {
            let e: &'static KeyEntry = Box::leak(Box::new(KeyEntry {
                key: key.into(),
                hash,
                state: AtomicU32::new(UNPLANNED),
                slabs: AtomicPtr::new(ptr::null_mut()),
                entering: AtomicU32::new(0),
                last_used: AtomicU64::new(0),
                replans: AtomicU32::new(0),
                window_allocs: AtomicU64::new(0),
                window_misses: AtomicU64::new(0),
                window_passes: AtomicU32::new(0),
                passes_profiled: AtomicU64::new(0),
                passes_replayed: AtomicU64::new(0),
                passes_backend: AtomicU64::new(0),
                slab_hits: AtomicU64::new(0),
                misses: [const { AtomicU64::new(0) }; MISS_REASONS],
                summary: SpinCell::new(None),
            }));
            TABLE[i].store(e as *const _ as *mut _, Ordering::Release);
            return Some(e);
        }
        i = (i + 1) % MAX_KEYS;
    }
    None
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
    /// Marks the entry used now (for LRU eviction).
    pub(crate) fn touch(&self) {
        self.last_used
            .store(CLOCK.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Publishes `slabs` as the key's plan; the previous one is retired. Evicts the least
    /// recently used plans beyond `max_plans`.
    pub(crate) fn publish(&'static self, slabs: Box<Slabs>, max_plans: usize) {
        let old = self.slabs.swap(Box::into_raw(slabs), Ordering::AcqRel);
        // SeqCst: see `pass::choose` (the swap must be ordered before the load of
        // `entering` in `reclaim`, which may run on another thread).
        fence(Ordering::SeqCst);
        self.state.store(PLANNED, Ordering::Release);
        self.touch();
        if !old.is_null() {
            retire(old, self);
        }
        evict_beyond(max_plans);
    }

    /// Adds a replayed pass's counts; returns `true` when the key diverges from its profile
    /// often enough (see `PassCounters::diverged`) to be profiled again.
    pub(crate) fn add_replay(&self, c: &PassCounters, window: u32, ratio: f64) -> bool {
        let r = Ordering::Relaxed;
        self.passes_replayed.fetch_add(1, r);
        self.slab_hits.fetch_add(c.slab_hits, r);
        for (g, &m) in self.misses.iter().zip(&c.misses) {
            if m != 0 {
                g.fetch_add(m, r);
            }
        }
        let allocs = self.window_allocs.fetch_add(c.allocations, r) + c.allocations;
        let misses = self.window_misses.fetch_add(c.diverged(), r) + c.diverged();
        let passes = self.window_passes.fetch_add(1, r) + 1;
        if passes < window {
            return false;
        }
        self.window_allocs.store(0, r);
        self.window_misses.store(0, r);
        self.window_passes.store(0, r);
        // Re-profiling is rate-limited: at most 8 times per key.
        allocs > 0 && misses as f64 > ratio * allocs as f64 && self.replans.load(r) < 8
    }
}

fn retire(slabs: *mut Slabs, entry: &'static KeyEntry) {
    RETIRED.with(|r| {
        r.push(Retired {
            slabs,
            entry,
            quiescent: false,
        })
    });
}

fn evict_beyond(max_plans: usize) {
    loop {
        let mut planned = 0usize;
        let mut oldest: Option<&'static KeyEntry> = None;
        for_each(|e| {
            if !e.slabs.load(Ordering::Acquire).is_null() {
                planned += 1;
                if oldest.is_none_or(|o| {
                    e.last_used.load(Ordering::Relaxed) < o.last_used.load(Ordering::Relaxed)
                }) {
                    oldest = Some(e);
                }
            }
        });
        let Some(victim) = oldest.filter(|_| planned > max_plans) else {
            return;
        };
        let old = victim.slabs.swap(ptr::null_mut(), Ordering::AcqRel);
        fence(Ordering::SeqCst); // as in `publish`
        let _ =
            victim
                .state
                .compare_exchange(PLANNED, UNPLANNED, Ordering::AcqRel, Ordering::Relaxed);
        let _ =
            victim
                .state
                .compare_exchange(REPLAN, UNPLANNED, Ordering::AcqRel, Ordering::Relaxed);
        if !old.is_null() {
            retire(old, victim);
        }
    }
}

/// Frees retired plans that nothing uses any more. Runs at pass boundaries.
pub(crate) fn reclaim() {
    RETIRED.with(|list| {
        // SeqCst: pairs with the fence in `pass::choose` (see there). Taken under the lock,
        // so the fence after each listed plan's swap (made before it was listed, under
        // this lock) precedes this one.
        fence(Ordering::SeqCst);
        list.retain_mut(|r| {
            if !r.quiescent {
                r.quiescent = r.entry.entering.load(Ordering::Acquire) == 0;
            }
            if !r.quiescent {
                return true;
            }
            // SAFETY: retired pointers stay valid until freed here.
            let s = unsafe { &*r.slabs };
            if s.active.load(Ordering::Acquire) != 0 || !s.try_retire() {
                return true;
            }
            // SAFETY: quiescent (no pass can reach it), unused, every instance dead.
            drop(unsafe { Box::from_raw(r.slabs) });
            false
        })
    });
}

/// Plans kept, instances and resident bytes over all keys.
pub(crate) fn totals() -> (u64, u64, u64) {
    let (mut plans, mut slabs, mut bytes) = (0, 0, 0);
    for_each(|e| {
        let s = e.slabs.load(Ordering::Acquire);
        if !s.is_null() {
            // SAFETY: a published plan is only freed after it is swapped out and
            // reclaimed; reading its counters while racing with that is tolerable only
            // because retirement waits for `entering == 0`, which we hold.
            e.entering.fetch_add(1, Ordering::AcqRel);
            fence(Ordering::SeqCst); // as in `pass::choose`
            let s = e.slabs.load(Ordering::Acquire);
            if !s.is_null() {
                let s = unsafe { &*s };
                plans += 1;
                slabs += s.instances() as u64;
                bytes += s.resident_bytes();
            }
            e.entering.fetch_sub(1, Ordering::AcqRel);
        }
    });
    (plans, slabs, bytes)
}

/// Before `fork`: takes every registry lock (in the order code nests them: `INSERT`, then
/// `RETIRED`, then summaries; none is held while taking an earlier one), so no other
/// thread is inside a critical section when the process is copied.
pub(crate) fn before_fork() {
    INSERT.lock_for_fork();
    RETIRED.lock_for_fork();
    for_each(|e| e.summary.lock_for_fork());
}

/// After `fork`, in the parent and in the child: releases what [`before_fork`] took (the
/// forking thread holds them, and it is the one thread the child has).
pub(crate) fn after_fork() {
    for_each(|e| e.summary.force_unlock());
    RETIRED.force_unlock();
    INSERT.force_unlock();
}
