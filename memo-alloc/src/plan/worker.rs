//! The planner thread: finished profiles are planned off the request's thread.
//!
//! A profiled pass ends by turning its recording into a `Profile` and [`submit`]ting a
//! [`Job`]; the pass then returns at the speed of an unprofiled pass plus recording. A
//! thread started at the first submission plans the jobs in order (`job.rs`), writes
//! their files and publishes their plans. Until then the key stays `Profiling`: its
//! passes replay its previous plan if it has one, and run on the backend otherwise.
//!
//! The queue is bounded ([`CAPACITY`] jobs): a profile submitted to a full queue is
//! abandoned (`AbandonReason::PlannerBusy`). The thread parks when the queue is empty;
//! submitting unparks it (neither allocates). With `Config::planner` set to `inline`,
//! jobs are planned on the submitting thread instead, as before.
//!
//! The process's exit waits (at most 10 s, from an `atexit` hook) for the profiles already
//! submitted, so a short program still writes its trace and plan files.
//!
//! Across `fork`: the queue's lock is one of the allocator's locks (taken by the fork
//! handlers). A child has no planner thread: it starts its own at its next submission;
//! the job the parent's thread was planning at the fork is abandoned in the child.

use std::collections::VecDeque;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::config::{self, Planner};
use crate::plan::job::Job;
use crate::registry::KeyEntry;
use crate::stats::{self, AbandonReason, GLOBAL};
use crate::support::fallible::try_grow_deque;
use crate::support::sync::plain::AtomicU64;
use crate::support::sync::{LockId, Ordering, SpinCell};
use crate::support::thread;

/// Most jobs waiting for the planner thread.
pub(crate) const CAPACITY: usize = 8;

struct Queue {
    jobs: VecDeque<Job>,
    /// The planner thread, once started.
    worker: Option<Thread>,
    /// A planner thread is being started.
    starting: bool,
    /// The key of the job being planned, if any.
    planning: Option<&'static KeyEntry>,
}

static QUEUE: SpinCell<Queue> = SpinCell::new(
    LockId::Planner,
    Queue {
        jobs: VecDeque::new(),
        worker: None,
        starting: false,
        planning: None,
    },
);

/// Whether the calling thread is the allocator's planner thread (so benchmarks can tell
/// the allocator's own thread).
pub fn is_planner_thread() -> bool {
    thread::is_own_thread()
}

/// Plans `job`, now (inline planning) or on the planner thread; `false` (the job
/// dropped) when the queue is full: the caller abandons the profile. Runs with the
/// re-entrancy guard set.
pub(crate) fn submit(job: Job) -> bool {
    if config::config().planner == Planner::Inline {
        run(job);
        return true;
    }
    enum Next {
        Wake(Thread),
        Start,
        Nothing,
    }
    let mut job = Some(job);
    let next = QUEUE.with(|q| {
        if q.jobs.len() >= CAPACITY || try_grow_deque(&mut q.jobs).is_err() {
            return None;
        }
        q.jobs.extend(job.take());
        Some(match (&q.worker, q.starting) {
            (Some(t), _) => Next::Wake(t.clone()),
            (None, false) => {
                q.starting = true;
                Next::Start
            }
            (None, true) => Next::Nothing, // the starting thread will find it
        })
    });
    match next {
        None => return false, // `job` is dropped here, outside the lock
        Some(Next::Wake(t)) => t.unpark(),
        Some(Next::Start) => start(),
        Some(Next::Nothing) => {}
    }
    true
}

/// How long the process's exit waits for the profiles already submitted.
const EXIT_DRAIN: Duration = Duration::from_secs(10);

/// Set once the exit hook is registered.
static AT_EXIT: crate::support::sync::plain::AtomicBool =
    crate::support::sync::plain::AtomicBool::new(false);

/// At process exit (registered with `atexit` when the first planner thread starts): waits
/// up to [`EXIT_DRAIN`] for the profiles already submitted, so that a short program's
/// trace and plan files (`MEMO_TRACE_DIR`) are written before it ends. Nothing to wait
/// for without a running planner thread (a forked child that never started one) or while
/// tests hold it paused.
extern "C" fn drain_at_exit() {
    let running = thread::with_bookkeeping(|| QUEUE.with(|q| q.worker.is_some() || q.starting));
    if running && !PAUSED.load(Ordering::Acquire) {
        let _ = wait_for_plans(EXIT_DRAIN);
    }
}

/// Starts the planner thread; if it cannot be started, plans the queued jobs here.
fn start() {
    if !AT_EXIT.swap(true, Ordering::AcqRel) {
        // SAFETY: registers a plain `extern "C" fn` with no arguments, as atexit expects;
        // it touches only this module's statics. A failure (no room) leaves exit as before.
        unsafe {
            libc::atexit(drain_at_exit);
        }
    }
    let spawned = std::thread::Builder::new()
        .name("memo-planner".into())
        .spawn(work);
    match spawned {
        Ok(_) => {} // the thread registers itself and takes the queued jobs
        Err(e) => {
            eprintln!("memomalloc: cannot start the planner thread ({e}); planning inline");
            QUEUE.with(|q| q.starting = false);
            while let Some(job) = QUEUE.with(|q| q.jobs.pop_front()) {
                run(job);
            }
        }
    }
}

/// The planner thread's loop.
fn work() {
    thread::mark_own_thread();
    let me = std::thread::current();
    QUEUE.with(|q| {
        q.worker = Some(me);
        q.starting = false;
    });
    loop {
        while PAUSED.load(Ordering::Acquire) {
            std::thread::park_timeout(Duration::from_millis(1));
        }
        let job = QUEUE.with(|q| {
            let job = q.jobs.pop_front();
            q.planning = job.as_ref().and_then(|j| j.entry);
            job
        });
        match job {
            Some(job) => {
                thread::with_bookkeeping(|| run(job));
                QUEUE.with(|q| q.planning = None);
            }
            None if trims_pending() => trim(true),
            None => std::thread::park(),
        }
    }
}

/// Trims asked for (see [`trim_later`]), and the count asked for when the last trim
/// started.
static TRIMS_ASKED: AtomicU64 = AtomicU64::new(0);
static TRIMS_DONE: AtomicU64 = AtomicU64::new(0);

/// Has the backend's heaps trimmed: by the planner thread, between its jobs, or here
/// when no planner thread runs (inline planning, or none started yet). For a pass that
/// ran on the backend while its key was being planned and ended after the plan was
/// published: what it freed would otherwise stay resident in its thread's arena (glibc
/// trims an arena only from its top), while the key's passes now run on slabs. Called at
/// a pass's end, with the re-entrancy guard set.
pub(crate) fn trim_later() {
    TRIMS_ASKED.fetch_add(1, Ordering::AcqRel);
    match QUEUE.with(|q| q.worker.clone()) {
        Some(t) => t.unpark(),
        None => trim(true),
    }
}

fn trims_pending() -> bool {
    TRIMS_ASKED.load(Ordering::Acquire) != TRIMS_DONE.load(Ordering::Acquire)
}

/// Returns the backend's free memory to the OS (`memory::release`), which answers every
/// trim asked for until now. After a profile is planned, its allocations are freed but
/// the backend keeps their memory, and the slabs that replay the pass come on top of it:
/// releasing once per profile keeps the peak resident size near one copy of the pass.
/// jemalloc's arenas are purged only with `purge_arenas`: when a key's passes move from
/// the backend to slabs (a key's plan made without a previous one, or a pass that ran on
/// the backend until its key's plan came). A re-profile's passes ran on the key's previous
/// plan, and a new shape class's on the key's other plans: purging after them would only
/// make the backend fault its pages in again.
fn trim(purge_arenas: bool) {
    let asked = TRIMS_ASKED.load(Ordering::Acquire);
    // A trim asked for by a pass that ran on the backend purges too.
    let purge_arenas = purge_arenas || asked != TRIMS_DONE.load(Ordering::Acquire);
    crate::memory::release::release_free_memory(purge_arenas);
    TRIMS_DONE.fetch_max(asked, Ordering::AcqRel);
}

/// Plans one job (on the planner thread, or inline), then trims the backend's heaps.
///
/// A panic while planning (a bug: planning reads only the allocator's own profile) gives
/// the profile up instead of taking the planner thread down: the key goes back to its
/// previous plan or to unplanned, and is profiled again later. Otherwise its passes would
/// wait for a plan that never comes, later profiles would fill the queue, and the
/// process's exit would wait for them.
fn run(job: Job) {
    let entry = job.entry;
    // A key's first plan moves its passes from the backend to slabs: purge. A shape
    // class's first plan does not (the key's passes are on slabs already), and what its
    // profiled pass freed is what the key's next backend requests reuse (a decoding
    // loop's escaping cache, which a purge after its prefill's class would fault back).
    let first_plan = job.first_plan();
    let planned =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(config::config())));
    if planned.is_err() {
        let key = entry.map_or("?", |e| &*e.key);
        eprintln!("memomalloc: planning pass {key:?} panicked; its profile is given up");
        if let Some(e) = entry {
            e.abandon_profile();
        }
    }
    trim(first_plan);
}

/// Waits until every submitted profile is planned and published (and the backend's heaps
/// trimmed where passes asked for it), or `timeout` passed; returns whether the planner is
/// idle. For tests and for services that profile at start-up (see `prewarm`).
///
/// ```
/// assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(1)));
/// ```
pub fn wait_for_plans(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let idle = thread::with_bookkeeping(|| {
            QUEUE.with(|q| q.jobs.is_empty() && q.planning.is_none()) && !trims_pending()
        });
        if idle {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// In a forked child, after the fork handlers released the locks: the parent's planner
/// thread is gone. The job it was planning is abandoned; queued ones wait for the
/// child's own planner thread, started at its next pass boundary.
pub(crate) fn after_fork_in_child() {
    let (lost, restart) = QUEUE.with(|q| {
        // The thread does not exist here; its handle is dropped (a reference count).
        drop(q.worker.take());
        q.starting = false;
        // A trim the parent's thread had yet to make is not made here (the heaps are
        // locked in a fork handler): `wait_for_plans` must not wait for it.
        TRIMS_DONE.store(TRIMS_ASKED.load(Ordering::Acquire), Ordering::Release);
        (q.planning.take(), !q.jobs.is_empty())
    });
    if let Some(e) = lost {
        stats::add(
            &GLOBAL.profiles_abandoned[AbandonReason::PlannerBusy as usize],
            1,
        );
        e.abandon_profile();
    }
    if restart {
        // Started lazily: here it would run inside the fork handler.
        RESTART.store(true, Ordering::Relaxed);
    }
}

/// The planner thread waits before its next job while set (tests only: `testing`).
pub(crate) static PAUSED: crate::support::sync::plain::AtomicBool =
    crate::support::sync::plain::AtomicBool::new(false);

/// Queued jobs wait for a planner thread in a forked child (see `after_fork_in_child`).
static RESTART: crate::support::sync::plain::AtomicBool =
    crate::support::sync::plain::AtomicBool::new(false);

/// Starts the child's planner thread if jobs were left waiting at the fork (at a pass
/// boundary, with the re-entrancy guard set).
pub(crate) fn restart_if_needed() {
    if !RESTART.swap(false, Ordering::Relaxed) {
        return;
    }
    let start_now = QUEUE.with(|q| {
        let idle = q.worker.is_none() && !q.starting;
        q.starting |= idle;
        idle
    });
    if start_now {
        start();
    }
}

/// The queue's lock, for the fork handlers.
pub(crate) fn lock() -> &'static crate::support::sync::SpinLock {
    QUEUE.lock()
}
