//! Counts the allocations made during passes, on the pass's own thread and on every other
//! thread, so that work an engine hands to helper threads (a rayon pool, say) shows in the
//! report even though memo-alloc only sees the pass's own thread.
//!
//! The harness marks its own threads ([`harness_thread`]) and brackets each memo pass with
//! [`enter`]. The dispatching global allocator calls [`on_alloc`] for every allocation of a
//! memo cell (other cells never call it). An allocation is counted
//! - as a *pass-thread* allocation when its thread is inside a pass it entered, and
//! - as a *helper* allocation when its thread is not a harness thread and at least one
//!   pass is running anywhere in the process.
//!
//! A harness thread between its own passes (computing a digest while another thread's pass
//! runs) is neither. This does not depend on memo-alloc's API: a helper thread that enters
//! the pass through memo-alloc (`PassHandle::in_scope`) is still a non-harness thread and
//! still counted as a helper, and memo-alloc's slab hits (wherever they happen) are compared against the sum.
//! Any other thread of the process that allocates while a pass runs is counted as a
//! helper too (in these cells the only such threads are the engine's worker pools).
//!
//! Cost: on a harness thread one thread-local read; on other threads one thread-local read
//! and one load of a read-mostly global; a counted allocation is a load and a store on a
//! cache line owned by its thread (a shared overflow line with an atomic add after
//! [`SLOTS`]` - 1` threads). All thread-locals are `const`-initialised `Cell`s without
//! destructors, as allocator code needs.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const OTHER: u8 = 0;
const HARNESS: u8 = 1;
const IN_PASS: u8 = 2;
const UNASSIGNED: usize = usize::MAX;

/// Counter slots: one per counting thread, the last one shared by every thread after the
/// first `SLOTS - 1`.
pub const SLOTS: usize = 64;

thread_local! {
    static ROLE: Cell<u8> = const { Cell::new(OTHER) };
    static SLOT: Cell<usize> = const { Cell::new(UNASSIGNED) };
}

/// Passes running now (all threads).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

#[repr(align(128))]
struct Slot {
    pass_thread: AtomicU64,
    helper: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    pass_thread: AtomicU64::new(0),
    helper: AtomicU64::new(0),
};
static COUNTS: [Slot; SLOTS] = [EMPTY; SLOTS];

/// Allocations counted so far in this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Made by a thread inside a pass it entered.
    pub pass_thread: u64,
    /// Made by a non-harness thread while some pass was running.
    pub helper: u64,
}

impl Counts {
    /// Both kinds together: every allocation made during passes.
    pub fn total(&self) -> u64 {
        self.pass_thread + self.helper
    }

    /// The counts since `before`.
    pub fn since(&self, before: &Counts) -> Counts {
        Counts {
            pass_thread: self.pass_thread - before.pass_thread,
            helper: self.helper - before.helper,
        }
    }
}

/// Marks the calling thread as one of the harness's own (a request thread or the cell's
/// main thread): its allocations count only inside the passes it enters.
pub fn harness_thread() {
    ROLE.with(|r| {
        if r.get() == OTHER {
            r.set(HARNESS);
        }
    });
}

/// A pass being counted; dropping it ends the bracket.
#[must_use = "the pass is counted until the guard is dropped"]
pub struct PassMark {
    previous: u8,
    // Guards are per thread (as memo-alloc's pass guard is).
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Starts counting the calling thread's allocations as pass-thread ones, and other
/// threads' as helper ones, until the guard is dropped.
pub fn enter() -> PassMark {
    let previous = ROLE.with(|r| r.replace(IN_PASS));
    // Relaxed is enough: work handed to a helper after this point is handed over with a
    // release/acquire pair (a channel, a rayon job), which makes this increment visible.
    ACTIVE.fetch_add(1, Ordering::Relaxed);
    PassMark {
        previous,
        _not_send: std::marker::PhantomData,
    }
}

impl Drop for PassMark {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::Relaxed);
        ROLE.with(|r| r.set(self.previous));
    }
}

/// Called by the global allocator for each allocation of a memo cell.
#[inline(always)]
pub fn on_alloc() {
    match ROLE.with(Cell::get) {
        IN_PASS => bump(false),
        // memo-alloc's own planner thread works for no pass: not a helper.
        OTHER if ACTIVE.load(Ordering::Relaxed) > 0 && !memo_alloc::is_planner_thread() => {
            bump(true)
        }
        _ => {}
    }
}

#[inline(always)]
fn bump(helper: bool) {
    let slot = SLOT.with(|s| {
        let v = s.get();
        if v != UNASSIGNED {
            return v;
        }
        let v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(SLOTS - 1);
        s.set(v);
        v
    });
    let s = &COUNTS[slot];
    let c = if helper { &s.helper } else { &s.pass_thread };
    if slot < SLOTS - 1 {
        // This thread is the slot's only writer.
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    } else {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// The counts so far (exact once the counted threads have synchronised with the caller,
/// e.g. by a barrier or a join).
pub fn snapshot() -> Counts {
    let mut c = Counts::default();
    for s in &COUNTS {
        c.pass_thread += s.pass_thread.load(Ordering::Relaxed);
        c.helper += s.helper.load(Ordering::Relaxed);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    // Other unit tests may run passes concurrently (they enter marks but never call
    // `on_alloc`, which only memo cells' allocator calls), so these tests assert what
    // holds whatever they do: pass-thread counts are exact, helper counts at least. The
    // tests that call `on_alloc` take turns.
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn turn() -> std::sync::MutexGuard<'static, ()> {
        TURN.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn pass_threads_count_inside_their_own_passes_only() {
        let _turn = turn();
        std::thread::spawn(|| {
            harness_thread();
            let c0 = snapshot();
            on_alloc();
            assert_eq!(snapshot().since(&c0).pass_thread, 0, "outside a pass");
            {
                let _m = enter();
                for _ in 0..5 {
                    on_alloc();
                }
            }
            on_alloc();
            assert_eq!(snapshot().since(&c0).pass_thread, 5);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn other_threads_count_as_helpers_while_a_pass_runs() {
        let _turn = turn();
        std::thread::spawn(|| {
            harness_thread();
            let c0 = snapshot();
            let m = enter();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..7 {
                        on_alloc();
                    }
                });
            });
            // A harness thread outside its own pass is not a helper.
            std::thread::scope(|s| {
                s.spawn(|| {
                    harness_thread();
                    on_alloc();
                });
            });
            drop(m);
            let d = snapshot().since(&c0);
            assert_eq!(d.pass_thread, 0);
            assert!(d.helper >= 7, "{d:?}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn threads_beyond_the_slots_share_the_last_one() {
        let _turn = turn();
        std::thread::spawn(|| {
            let c0 = snapshot();
            let threads = SLOTS + 8;
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        harness_thread();
                        let _m = enter();
                        on_alloc();
                        on_alloc();
                    });
                }
            });
            assert_eq!(snapshot().since(&c0).pass_thread, 2 * threads as u64);
        })
        .join()
        .unwrap();
    }
}
