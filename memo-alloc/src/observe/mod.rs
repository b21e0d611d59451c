//! Observing allocations beyond passes: whole-program recording (`MEMO_PROFILE`,
//! [`Profiler`]) and heap counters ([`HeapStats`], [`HeapTracker`]).
//!
//! A thread is *observed* while a recording runs or while it has a tracker open: its path
//! is then `AllocPath::Observe` (see `support::thread`), and the allocator calls
//! [`on_alloc`], [`on_free`] and the realloc pair around the path its pass wants. With
//! nothing observed, nothing here runs: the allocation path reads its one thread-local.
//!
//! - `state.rs`: the recording's state, sequence, clock and cap;
//! - `log.rs`: each observed thread's log and counting ([`log::ThreadObs`]);
//! - `counts.rs`: the heap counters;
//! - `sites.rs`: sampled call sites;
//! - `write.rs`: the trace of a recording, from every thread's log;
//! - `program.rs`: `MEMO_PROFILE` (from the first allocation to exit, or a signal), the
//!   [`Profiler`] guard, the trackers.
//!
//! Everything here runs with the re-entrancy guard set: its own allocations go to the
//! backend. It may use `format`, `profiling` (to resolve frames), `support` and `config`.

pub(crate) mod counts;
pub(crate) mod log;
pub(crate) mod program;
mod sites;
pub(crate) mod state;
mod write;

pub use counts::HeapStats;
pub use program::{process_heap, thread_heap, HeapTracker, Profiler, ProfilerOptions, Written};

use crate::format::trace::ScopeKind;
use crate::support::thread;
use log::{Ev, EvKind, ThreadObs, NO_SITE};

/// Reads `MEMO_PROFILE` once per process (at a thread's first call, with the guard set).
pub(crate) fn init() {
    program::init_from_env();
}

/// What an observed allocation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Made {
    /// `alloc`, from the backend.
    Alloc,
    /// `alloc_zeroed`, from the backend.
    Zeroed,
    /// From the slab of a replayed pass (counted, not logged: its free is not seen).
    Slab,
}

fn event(kind: EvKind, addr: usize, size: u64, align: usize, scope: u32) -> Ev {
    Ev {
        seq: 0,
        ns: 0,
        addr,
        size,
        scope,
        site: NO_SITE,
        kind,
        extra: align.trailing_zeros() as u8,
    }
}

/// The innermost recorded scope of this thread.
fn current_scope() -> u32 {
    log::SCOPE.try_with(|s| s.get()).unwrap_or(0)
}

/// Runs `f` on this thread's state, with the re-entrancy guard set.
fn with_obs(f: impl FnOnce(&mut ThreadObs)) {
    thread::with_bookkeeping(|| {
        if let Some(obs) = log::this_thread() {
            f(obs)
        }
    });
}

/// An observed thread got `ptr` (`size` bytes, alignment `align`).
pub(crate) fn on_alloc(ptr: *mut u8, size: usize, align: usize, made: Made) {
    with_obs(|obs| {
        obs.counting
            .alloc(ptr as usize, size as u64, made == Made::Slab);
        if made == Made::Slab || !state::recording() {
            return;
        }
        let kind = match made {
            Made::Zeroed => EvKind::AllocZeroed,
            _ => EvKind::Alloc,
        };
        let mut ev = event(kind, ptr as usize, size as u64, align, current_scope());
        ev.site = sites::maybe_capture(obs, size as u64);
        obs.append(ev);
    });
}

/// An observed thread is about to free `ptr` (before the backend does).
pub(crate) fn on_free(ptr: *mut u8) {
    with_obs(|obs| {
        obs.counting.free(ptr as usize);
        if state::recording() {
            obs.append(event(EvKind::Free, ptr as usize, 0, 1, current_scope()));
        }
    });
}

/// An observed thread is about to realloc `old` (before the backend moves it).
pub(crate) fn on_realloc_start(old: *mut u8) {
    if state::recording() {
        with_obs(|obs| {
            obs.append(event(
                EvKind::ReallocFree,
                old as usize,
                0,
                1,
                current_scope(),
            ));
        });
    }
}

/// An observed thread's realloc moved `old` to `new` (`size` bytes, alignment `align`);
/// `new` is null when the backend failed (`old` stays live).
pub(crate) fn on_realloc_end(old: *mut u8, new: *mut u8, size: usize, align: usize) {
    with_obs(|obs| {
        if new.is_null() {
            // The old block lives on: the writer undoes the end logged at the start.
            if state::recording() {
                obs.append(event(EvKind::Realloc, old as usize, FAILED, 1, 0));
            }
            return;
        }
        obs.counting.free(old as usize);
        obs.counting.alloc(new as usize, size as u64, false);
        if state::recording() {
            let mut ev = event(EvKind::Realloc, new as usize, size as u64, align, 0);
            ev.scope = current_scope();
            ev.site = sites::maybe_capture(obs, size as u64);
            obs.append(ev);
        }
    });
}

/// The size of a `Realloc` event whose backend call failed (its old block lives on).
pub(crate) const FAILED: u64 = u64::MAX;

/// A recorded scope this thread entered: its id and the scope it was in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScopeMark {
    pub(crate) id: u32,
    pub(crate) outer: u32,
}

/// Enters a new recorded scope `name` of `kind` on this thread, while a recording runs.
pub(crate) fn enter_scope(name: &'static str, kind: ScopeKind) -> Option<ScopeMark> {
    if !state::recording() {
        return None;
    }
    let outer = current_scope();
    let id = state::next_scope();
    let mut ev = event(
        EvKind::Enter,
        name.as_ptr() as usize,
        name.len() as u64,
        1,
        id,
    );
    ev.site = outer;
    ev.extra = kind as u8;
    with_obs(|obs| {
        obs.append(ev);
    });
    let _ = log::SCOPE.try_with(|s| s.set(id));
    Some(ScopeMark { id, outer })
}

/// Leaves a recorded scope (its exit time is the last one logged).
pub(crate) fn exit_scope(mark: ScopeMark) {
    if state::recording() {
        with_obs(|obs| {
            obs.append(event(EvKind::Exit, 0, 0, 1, mark.id));
        });
    }
    let _ = log::SCOPE.try_with(|s| s.set(mark.outer));
}
