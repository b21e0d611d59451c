//! `memo-alloc`: a profiling `#[global_allocator]` for programs that repeat the same
//! computation. Linux only (64-bit), today.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: memo_alloc::MemoAlloc<memo_alloc::Jemalloc> = memo_alloc::MemoAlloc::jemalloc();
//!
//! fn infer(x: &[f32]) -> Vec<f32> {
//!     let _pass = memo_alloc::pass("model");          // profile once, replay afterwards
//!     let h: Vec<f32> = { let _op = memo_alloc::op("scale"); x.iter().map(|v| v * 2.0).collect() };
//!     let y: Vec<f32> = { let _op = memo_alloc::op("relu"); h.iter().map(|v| v.max(0.0)).collect() };
//!     y                                                 // outlives the pass: never in the slab
//! }
//! # fn main() { for _ in 0..3 { infer(&[1.0, -2.0]); } }
//! ```
//!
//! # The contract
//! - The first [`pass()`] of a key is **profiled**: every allocation, reallocation and free on
//!   the pass's thread is recorded with its size, alignment, lifetime (in events) and
//!   provenance (its op-scope path and its ordinal in that scope). At the end of the pass
//!   the allocations that did not outlive it are planned into one slab with
//!   `memo-planner` (strategy `best` by default).
//! - Later passes of the key are **replayed**: each allocation is matched to its planned
//!   slot by (scope, ordinal) and served from a slab by pointer arithmetic, with no lock
//!   and no system call. Each concurrently running pass gets its own slab instance.
//! - Whatever the program does differently from its profile stays correct: before a slot
//!   is handed out, a check proves no overlapping slot is live; a failed check, a larger
//!   request, a stricter alignment, an unplanned allocation or one that escaped the
//!   profiled pass is served by the backend and counted as a *miss* with its reason
//!   ([`MissReason`], [`stats()`]). A key that misses often is profiled again: one whose
//!   replayed passes miss more than half of their requests at most six replayed passes
//!   after its plan was published or loaded (three when no request hits, or when no pass
//!   has yet replayed the plan within the miss ratio), whatever the plan came from.
//! - Frees of slab pointers work from any thread and mark the slot free with one atomic
//!   store. Allocations outside passes go to the backend after one thread-local check.
//! - Guards may be dropped in any order: each ends its own pass or scope (passes are
//!   identified by identity, not by their place on a stack).
//!
//! # Never taking the process down
//! - A backend out of memory: the caller gets null; a profile whose bookkeeping cannot
//!   grow is abandoned and the pass goes on on the backend ([`Stats::profiles_abandoned`]).
//! - A profile is bounded (`MEMO_MAX_PROFILE_EVENTS`, `MEMO_MAX_PROFILE_BYTES`); past the
//!   bound it is abandoned likewise, and the key backs off before profiling again.
//! - A pass that unwinds (a panic) is abandoned: its profile is not planned, and what its
//!   replay did counts toward no re-profiling.
//! - Plan files are checked against bounds before anything is sized from them, and as
//!   plans: slots that were live together (by the lifetimes the file gives them) may not
//!   share an address. A bad one is rejected with one line on stderr and its key profiled
//!   afresh ([`Stats::plan_files_rejected`]); a file cut short by a writer is such a file.
//!   The allocator writes its own files whole (a temporary file, renamed).
//! - A thread that ends inside a pass ends the pass; `std::process::exit` or a panic
//!   while the planner thread plans waits (at most 10 s) for the profiles submitted.
//! - `fork()` at any moment: the fork handlers take every lock of the allocator, so the
//!   child finds none held, and its passes profile, plan and replay.
//! - A block kept past its pass pins its slab instance: the instance's other pages are
//!   returned to the OS, the pool reuses pinned instances rather than grow without bound,
//!   and a slot whose blocks keep outliving passes is served by the backend.
//! - At most `MEMO_MAX_PLANS` keys keep plans, admitted by frequency of use, so that a
//!   working set keeps its plans under cyclic access ([`Stats::churn`] counts the rest).
//!
//! # What is planned
//! Allocations made in the pass between `pass()` and the guard's drop, on its thread or
//! in a helper context a thread entered ([`current`], [`PassHandle::enter`]; an async
//! pass: [`Pass::wrap`]), and freed before the pass ends. Not planned: allocations that
//! outlive the pass (outputs), allocations freed on another thread during profiling
//! (their lifetime is unknown), allocations of threads that did not enter the pass.
//!
//! # Reading it back
//! [`stats()`] gives the process-wide counters ([`Stats`]; [`Stats::to_prometheus`] for a
//! `/metrics` page), [`report`] one key's plan and counters ([`PassReport`]), [`keys`] the
//! keys. They serialise with serde.
//!
//! # Shapes under one key
//! A key whose passes come in a few shapes (sequence lengths, a decoding loop's prefill
//! and steps) gets a plan per shape without naming buckets. A pass's *signature* is the
//! size and alignment of its first four requests above the lane bound. When a re-profile
//! of a key whose plan replayed without diverging has a first large request more than
//! 1.25x from the plan's (or, where their first large requests are alike or within
//! 1.25x, a later one: the key's *lead* is the first that parts them), it founds a
//! *shape class*: a plan of its own under the key `<key>#<n>`, with its own divergence
//! window and merges. A re-profile of another shape than a plan no pass matched
//! replaces that plan instead; when the replaced shape comes back (a replay that misses
//! most of its requests or of its bytes: a decoding loop's prefill on its steps' plan),
//! the key is classed, and that shape founds a class at its next pass. So is a key one of
//! whose replays diverges from a plan other passes fit (beyond the replan ratio, by 16
//! requests or more, or most of its bytes) with first large requests that part from the
//! plan's: a length drawn now and then whose shape the longest length's plan does not
//! serve, between lengths it does.
//!
//! From then on each pass of the key is decided by its signature at the lead, at
//! whatever op-scope depth the deciding request comes: until then its requests go to the
//! backend (in a replay, misses of reason `no_slab`), and from that request on the
//! class's plan profiles or replays the rest of the pass, the op scopes open at the
//! decision included. The class is the one of that signature, else the one within 1.25x
//! of its first size, else a new one while the key has fewer than `MEMO_MAX_CLASSES`
//! (default 8; 1: no classes), else the nearest above. A class's passes count on the
//! class's [`report`] (`<key>#<n>`); the key's report counts those its own plan served,
//! and [`PassReport::shape_classes`] its classes. A thread's passes of a key's classes
//! take turns on one slab block (the one its last pass gave back, when that holds the
//! next class's plan), so the slab memory of a classed key on one thread is its largest
//! class's, not the sum of its classes'.
//!
//! # Whole programs and heap assertions
//! `MEMO_PROFILE=<path>` records every allocation of every thread, from the first
//! allocation to process exit (written by an `atexit` hook, or on `SIGINT`/`SIGTERM`; a
//! crash loses it), into a trace every `memo` subcommand reads; [`Profiler`] does the same
//! from its start to its drop. Each record carries its thread, real time, op scope and
//! pass, and (sampled: [`ProfilerOptions`]) its call site; the recording's buffers are
//! capped (`MEMO_PROFILE_MAX_BYTES`), past which it is truncated and says so.
//!
//! [`HeapTracker`] counts its own thread's heap ([`HeapStats`]: current and peak bytes and
//! blocks, allocations, slab share), so tests that run in parallel in one process each
//! assert on their own; [`thread_heap`] and [`process_heap`] give the thread's and the
//! process's. A block counts against the thread that allocated it (see [`HeapStats`]).
//!
//! ```
//! #[global_allocator]
//! static ALLOC: memo_alloc::MemoAlloc<memo_alloc::Jemalloc> = memo_alloc::MemoAlloc::jemalloc();
//!
//! fn handle(request: &[u8]) -> usize {
//!     let _pass = memo_alloc::pass("request");
//!     let copy = std::hint::black_box(request.to_vec());
//!     copy.len()
//! }
//!
//! // "This request allocates at most 2 KiB."
//! let t = memo_alloc::HeapTracker::start();
//! handle(&[7; 1000]);
//! assert!(t.stats().bytes <= 2048);
//! assert_eq!(t.stats().current_bytes, 0);
//! drop(t);
//!
//! // "This pass replays whole": every allocation of a later pass from its slab.
//! memo_alloc::wait_for_plans(std::time::Duration::from_secs(10));
//! let t = memo_alloc::HeapTracker::start();
//! handle(&[7; 1000]);
//! assert_eq!(t.stats().slab_share(), 1.0);
//! ```
//!
//! # Backends
//! What is not served from a slab goes to the backend: allocations outside passes and on
//! threads that did not enter one, escaping allocations, misses, passes without a plan,
//! and the allocator's own bookkeeping (behind its re-entrancy guard). The recommended
//! backend is jemalloc: [`MemoAlloc::jemalloc`] ([`Jemalloc`], tikv-jemallocator; the
//! `jemalloc` feature, on by default). [`MemoAlloc::system`] serves it from `System`
//! (glibc), and with the `mimalloc` feature [`MemoAlloc::mimalloc`] from mimalloc
//! ([`MiMalloc`]), faster than jemalloc where many blocks escape but with more resident
//! memory. Without default features the crate builds no C code:
//!
//! ```toml
//! memo-alloc = { path = "../memomalloc/memo-alloc", default-features = false }
//! ```
//!
//! Once a profile is planned, the backend's free memory goes back to the OS (on the
//! planner thread), so that the profiled pass's freed buffers are not resident beside the
//! slab that replays it: glibc's heaps are trimmed (`malloc_trim`), and over
//! [`MemoAlloc::jemalloc`] every jemalloc arena is purged (`arena.<all>.purge`; jemalloc
//! would otherwise keep them as dirty pages for its 10 s decay) when the key's first plan
//! is published (not after a re-profile, whose passes ran on slabs), after the blocks
//! that the profiled pass's thread and the planner freed into their jemalloc thread
//! caches went back to the arenas (`thread.tcache.flush`); the purge returns the
//! free ranges inside the 2 MiB pages that a model's weights fill (the huge pages of
//! `Jemalloc`) page by page, which splits them, so they are collapsed into huge pages
//! again (`MADV_COLLAPSE`, Linux 6.1 and later). A backend given to [`MemoAlloc::new`]
//! other than glibc keeps its free memory as it would.
//!
//! The slabs, the region, lanes and replay are the same over every backend. The crate's
//! integration tests run over each (`MEMO_TEST_BACKEND=jemalloc cargo test -p memo-alloc`,
//! and `mimalloc`). Across `fork`: jemalloc registers its fork handlers when it starts
//! (a library constructor), the crate at its first pass, so the crate's prepare handler
//! runs first and takes the crate's locks while a thread inside one of them can still
//! reach the backend; jemalloc's runs after it. mimalloc registers none on Linux: a fork
//! while another thread holds one of mimalloc's own locks is mimalloc's matter, with or
//! without memo.
//!
//! # Settings
//! Read once at the first pass from the environment, or set in code with [`configure`]
//! before it (`Config::default().with_mode(Mode::Profile)`, say):
//! `MEMO_MODE=replay|profile|off`, `MEMO_STRATEGY=<offset strategy>`,
//! `MEMO_PLANNER=background|inline` (where profiles are planned),
//! `MEMO_TRACE_DIR=<dir>` (write each profiled pass's trace and plan as JSON),
//! `MEMO_PLAN_DIR=<dir>` (load plans written earlier; their keys skip profiling),
//! `MEMO_BACKTRACE=1` (capture call sites while profiling), `MEMO_MAX_PLANS=<n>`,
//! `MEMO_MAX_PROFILE_EVENTS=<n>`, `MEMO_MAX_PROFILE_BYTES=<n>`, `MEMO_LANES=<bytes>`
//! (default 256: requests up to that size replay from size-class cells of the slab instead
//! of planned slots, which keeps tables and profiles small for passes of many tiny
//! allocations; 0: every request from a planned slot). See [`Config`].
//!
//! # How it is tested
//! Beyond unit and integration tests: loom models of the lock-free protocols, a shadow
//! allocator that checks every block, a randomized multi-threaded stress test
//! (`tests/stress.rs`: `MEMO_STRESS_SEED`, `MEMO_STRESS_SECS`, `MEMO_STRESS_THREADS`),
//! fuzz targets for plan files and the replay matcher (the workspace's `fuzz/`), and Miri
//! on the pure logic (`cargo +nightly miri test -p memo-alloc --lib`; under `cfg(miri)` the
//! slab region is a heap buffer). The repository's `docs/ARCHITECTURE.md` has the commands.

#![warn(missing_docs)]

mod alloc;
mod api;
pub mod config;
mod format;
#[cfg(all(test, loom))]
mod loom_tests;
mod memory;
mod observe;
mod pass;
mod plan;
mod profiling;
mod registry;
mod replay;
pub mod stats;
mod support;
#[doc(hidden)]
pub mod testing;

#[cfg(feature = "jemalloc")]
pub use alloc::Jemalloc;
pub use alloc::MemoAlloc;
pub use api::buckets::{prewarm, Buckets};
pub use api::carry::{current, EnterGuard, InPass, Pass, PassHandle};
pub use api::guards::{observe, op, pass, OpGuard, PassGuard};
pub use api::report::{keys, report, stats, PassReport};
pub use config::{configure, Config, Mode, Planner};
pub use format::{files, trace};
/// mimalloc, the backend of [`MemoAlloc::mimalloc`] (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
pub use mimalloc::MiMalloc;
pub use observe::{
    process_heap, thread_heap, HeapStats, HeapTracker, Profiler, ProfilerOptions, Written,
};
pub use plan::worker::{is_planner_thread, wait_for_plans};
pub use profiling::tag;
pub use registry::PlanState;
pub use stats::{AbandonReason, MissReason, Misses, PlanRejection, Stats};
