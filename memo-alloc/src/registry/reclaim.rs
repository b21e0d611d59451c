//! Safe reclamation of plans: a plan taken out of its key (replaced or evicted) is
//! *retired* and freed only once nothing can reach it.
//!
//! A pass reaches a key's plan in three steps: enter the key's [`Readers`], load the plan
//! pointer, register with the plan (`Slabs::active`, by taking an instance). A retired
//! plan is freed once (1) its key's readers were seen at zero after the plan was taken
//! out: every pass that could have loaded the old pointer has registered or left,
//! (2) no pass holds one of its instances, (3) none of its slots is live.
//!
//! (1) needs `SeqCst` fences: "enter, load the pointer" against "swap the pointer, load
//! the count" is a store-buffering pattern in which, with acquire/release alone, both
//! loads may see old values. The reader fences in [`Readers::enter`]; the writer side
//! fences after its CAS (in [`Reclaimer::retire`]) and again before loading the count (in
//! [`Reclaimer::reclaim`], which may run on another thread; the list's lock orders the
//! two). Either writer fence suffices; the loom model `publication` fails without the
//! reader's fence or without both writer fences.

use crate::replay::slab::pool::Slabs;
use crate::support::fallible::try_grow;
use crate::support::sync::{fence, AtomicU32, LockId, Ordering, SpinCell};

/// The passes between loading a key's plan pointer and registering with that plan.
pub(crate) struct Readers {
    entering: AtomicU32,
}

impl Readers {
    pub(crate) fn new() -> Readers {
        Readers {
            entering: AtomicU32::new(0),
        }
    }

    /// Enters: until the guard drops, a plan loaded from the key is not freed.
    pub(crate) fn enter(&self) -> ReadGuard<'_> {
        self.entering.fetch_add(1, Ordering::AcqRel);
        // SeqCst: pairs with the fence in `Reclaimer::retire`; see the module doc.
        fence(Ordering::SeqCst);
        ReadGuard { readers: self }
    }

    fn quiescent(&self) -> bool {
        self.entering.load(Ordering::Acquire) == 0
    }
}

/// A pass between loading a key's plan and registering with it; see [`Readers::enter`].
pub(crate) struct ReadGuard<'a> {
    readers: &'a Readers,
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.readers.entering.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Retired {
    slabs: *mut Slabs,
    readers: *const Readers,
    /// The readers were seen at zero after the plan was taken out.
    quiescent: bool,
}

// SAFETY: only touched under the reclaimer's lock; both pointers are owned or outlive it.
unsafe impl Send for Retired {}

/// The list of retired plans.
pub(crate) struct Reclaimer {
    list: SpinCell<Vec<Retired>>,
}

/// The process's reclaimer.
pub(crate) static RECLAIMER: Reclaimer = Reclaimer::new();

impl Reclaimer {
    pub(crate) const fn new() -> Reclaimer {
        Reclaimer {
            list: SpinCell::new(LockId::Retired, Vec::new()),
        }
    }

    /// Retires `slabs`, just taken out of the key whose readers are `readers` (by the
    /// caller's CAS). If the list cannot grow (out of memory) the plan is leaked: never
    /// freed, which is safe.
    ///
    /// # Safety
    /// `slabs` came from `Box::into_raw`, no key refers to it any more, and it is retired
    /// once; `readers` outlives the reclaimer's use of it (key entries are never freed).
    pub(crate) unsafe fn retire(&self, slabs: *mut Slabs, readers: &Readers) {
        // SeqCst: the caller's CAS that took `slabs` out is ordered before the load of
        // `entering` in `reclaim` (see the module doc).
        fence(Ordering::SeqCst);
        self.list.with(|l| {
            if try_grow(l).is_ok() {
                l.push(Retired {
                    slabs,
                    readers,
                    quiescent: false,
                });
            }
        });
    }

    /// Frees the retired plans nothing uses any more; returns how many. Runs at pass
    /// boundaries.
    pub(crate) fn reclaim(&self) -> usize {
        let mut freed = 0;
        self.list.with(|list| {
            // SeqCst: pairs with the fence in `Readers::enter`. Taken under the lock, so
            // the fence after each listed plan's CAS (made before it was listed, under
            // this lock) precedes this one.
            fence(Ordering::SeqCst);
            list.retain_mut(|r| {
                if !r.quiescent {
                    // SAFETY: readers outlive the reclaimer's use (retire's contract).
                    r.quiescent = unsafe { (*r.readers).quiescent() };
                }
                if !r.quiescent {
                    return true;
                }
                // SAFETY: retired pointers stay valid until freed here.
                let s = unsafe { &*r.slabs };
                if s.active.load(Ordering::Acquire) != 0 || !s.try_retire() {
                    return true;
                }
                debug_assert_eq!(s.active.load(Ordering::Relaxed), 0);
                // SAFETY: quiescent (no pass can reach it), unused, every instance dead.
                drop(unsafe { Box::from_raw(r.slabs) });
                freed += 1;
                false
            })
        });
        freed
    }

    /// Plans retired and not yet freed, and their instances.
    pub(crate) fn pending(&self) -> (u64, u64) {
        self.list.with(|l| {
            let instances = l
                .iter()
                // SAFETY: retired pointers stay valid until freed (under this lock).
                .map(|r| unsafe { (*r.slabs).instances() } as u64)
                .sum();
            (l.len() as u64, instances)
        })
    }

    /// Bytes resident in the slabs of the plans retired and not yet freed.
    pub(crate) fn resident_bytes(&self) -> u64 {
        self.list.with(|l| {
            l.iter()
                // SAFETY: retired pointers stay valid until freed (under this lock).
                .map(|r| unsafe { (*r.slabs).resident_bytes() })
                .sum()
        })
    }

    /// The lock, for the fork handlers.
    pub(crate) fn lock(&self) -> &crate::support::sync::SpinLock {
        self.list.lock()
    }
}
