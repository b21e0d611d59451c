//! `memo-alloc`: a profiling `#[global_allocator]` for programs that repeat the same
//! computation.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: memo_alloc::MemoAlloc = memo_alloc::MemoAlloc::system();
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
//! - The first [`pass`] of a key is **profiled**: every allocation, reallocation and free on
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
//!   ([`MissReason`], [`stats`]). A key that misses often is profiled again.
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
//! - Plan files are checked against bounds before anything is sized from them; a bad one
//!   is rejected with one line on stderr and its key profiled afresh
//!   ([`Stats::plan_files_rejected`]).
//! - `fork()` at any moment: the fork handlers take every lock of the allocator, so the
//!   child finds none held, and its passes profile, plan and replay.
//! - A block kept past its pass pins its slab instance: the instance's other pages are
//!   returned to the OS, the pool reuses pinned instances rather than grow without bound,
//!   and a slot whose blocks keep outliving passes is served by the backend.
//! - At most `MEMO_MAX_PLANS` keys keep plans, admitted by frequency of use, so that a
//!   working set keeps its plans under cyclic access ([`Stats::churn`] counts the rest).
//!
//! # What is planned
//! Allocations made on the pass's thread between `pass()` and the guard's drop, freed on
//! that thread before the pass ends. Not planned: allocations that outlive the pass
//! (outputs), allocations freed on another thread during profiling (their lifetime is
//! unknown), allocations on other threads.
//!
//! # Settings
//! Read once at the first pass from the environment, or set in code with [`configure`]
//! before it: `MEMO_MODE=replay|profile|off`, `MEMO_STRATEGY=<offset strategy>`,
//! `MEMO_TRACE_DIR=<dir>` (write each profiled pass's trace and plan as JSON),
//! `MEMO_PLAN_DIR=<dir>` (load plans written earlier; their keys skip profiling),
//! `MEMO_BACKTRACE=1` (capture call sites while profiling), `MEMO_MAX_PLANS=<n>`,
//! `MEMO_MAX_PROFILE_EVENTS=<n>`, `MEMO_MAX_PROFILE_BYTES=<n>`, `MEMO_LANES=<bytes>`
//! (default 256: requests up to that size replay from size-class cells of the slab instead
//! of planned slots, which keeps tables and profiles small for passes of many tiny
//! allocations; 0: every request from a planned slot). See [`Config`].

#![warn(missing_docs)]

mod api;
pub mod config;
mod format;
#[cfg(all(test, loom))]
mod loom_tests;
mod memory;
mod pass;
mod plan;
mod profiling;
mod registry;
mod replay;
pub mod stats;
mod support;
#[doc(hidden)]
pub mod testing;

use std::alloc::{GlobalAlloc, Layout, System};

pub use api::buckets::{prewarm, Buckets};
pub use api::carry::{current, EnterGuard, InPass, Pass, PassHandle};
pub use api::guards::{observe, op, pass, OpGuard, PassGuard};
pub use api::report::{report, stats, PassReport};
pub use config::{configure, Config, Mode, Planner};
pub use format::{files, trace};
pub use plan::worker::{is_planner_thread, wait_for_plans};
pub use profiling::tag;
pub use stats::{AbandonReason, MissReason, PlanRejection, Stats};

use memory::{geometry, own_blocks, region};
use pass::context::Context;
use pass::tls::Hot;
use pass::{lifecycle, tls};

/// The allocator (**contract**): `MemoAlloc::system()` over the system allocator, or
/// `MemoAlloc::new(backend)` over any other.
///
/// Use one per process, as the `#[global_allocator]`.
pub struct MemoAlloc<B: GlobalAlloc = System> {
    backend: B,
}

impl MemoAlloc<System> {
    /// Over the system allocator.
    pub const fn system() -> MemoAlloc<System> {
        MemoAlloc { backend: System }
    }
}

impl<B: GlobalAlloc> MemoAlloc<B> {
    /// Over `backend`, which serves everything that is not served from a slab.
    pub const fn new(backend: B) -> MemoAlloc<B> {
        MemoAlloc { backend }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The allocation path: one thread-local read decides between the backend, the slab
    /// and the recorder.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    #[inline(always)]
    unsafe fn alloc_impl(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        let (hot, pass) = tls::hot_pass();
        debug_assert!(hot == Hot::Backend || !pass.is_null());
        match hot {
            // SAFETY: forwarded from GlobalAlloc::alloc / alloc_zeroed.
            Hot::Backend => unsafe { self.alloc_outside(layout, zeroed) },
            // SAFETY: `hot == Replay` only while `pass` is this thread's replayed pass.
            Hot::Replay => unsafe { self.alloc_replayed(&mut *pass, layout, zeroed) },
            // SAFETY: `hot == Profile` only while `pass` is this thread's profiled pass.
            Hot::Profile => unsafe { self.alloc_profiled(&mut *pass, layout, zeroed) },
            // SAFETY: `hot == Counted` only while `pass` is this thread's running pass.
            Hot::Counted => unsafe { self.alloc_counted(&mut *pass, layout, zeroed) },
        }
    }

    /// # Safety
    /// `pass` is this thread's replayed pass; the rest as `GlobalAlloc::alloc`.
    #[inline]
    unsafe fn alloc_replayed(&self, pass: &mut Context, layout: Layout, zeroed: bool) -> *mut u8 {
        // SAFETY: `pass` is this thread's replayed pass.
        match unsafe { replay::alloc(pass, layout) } {
            Ok(ptr) => {
                pass.counters.slab_hits += 1;
                pass.counters.slab_bytes += layout.size() as u64;
                if zeroed {
                    // SAFETY: the slot holds at least `layout.size()` bytes.
                    unsafe { ptr.write_bytes(0, layout.size()) };
                }
                ptr
            }
            // SAFETY: forwarded.
            Err(miss) => unsafe { self.alloc_missed(pass, miss, layout, zeroed) },
        }
    }

    /// A replayed request the slab did not serve: the backend serves it and the miss is
    /// counted, unless the backend fails too (then the request used up no slot and counts
    /// nowhere) or the thread is unwinding (then the pass is abandoned: the rest of it runs
    /// on the backend, uncounted).
    ///
    /// # Safety
    /// As [`Self::alloc_replayed`], with `miss` just returned by `replay::alloc`.
    #[cold]
    #[inline(never)]
    unsafe fn alloc_missed(
        &self,
        pass: &mut Context,
        miss: MissReason,
        layout: Layout,
        zeroed: bool,
    ) -> *mut u8 {
        if std::thread::panicking() {
            // SAFETY: right after the miss, on the pass's thread.
            unsafe { replay::undo(pass) };
            tls::with_bookkeeping(|| lifecycle::abandon_running(pass, AbandonReason::Panic));
            // SAFETY: forwarded.
            return unsafe { self.backend_alloc(layout, zeroed) };
        }
        // SAFETY: forwarded.
        let ptr = unsafe { self.backend_alloc(layout, zeroed) };
        if ptr.is_null() {
            // SAFETY: right after the miss, on the pass's thread.
            unsafe { replay::undo(pass) };
            return ptr;
        }
        pass.counters.miss(miss, layout.size() as u64);
        ptr
    }

    /// Profiling: the backend serves, then the recorder notes it with the guard set.
    ///
    /// # Safety
    /// `pass` is this thread's profiled pass; the rest as `GlobalAlloc::alloc`.
    #[inline(never)]
    unsafe fn alloc_profiled(&self, pass: &mut Context, layout: Layout, zeroed: bool) -> *mut u8 {
        // SAFETY: forwarded.
        let ptr = unsafe { self.pass_block(pass, layout, zeroed) };
        if ptr.is_null() {
            return ptr; // a failed request is not part of the pass
        }
        pass.counters.allocations += 1;
        let node = pass.node;
        tls::with_bookkeeping(|| {
            let recorded = match pass.recorder.as_mut() {
                _ if std::thread::panicking() => Err(AbandonReason::Panic),
                Some(rec) => rec.on_alloc(
                    ptr,
                    layout.size() as u64,
                    layout.align() as u64,
                    zeroed,
                    node,
                ),
                None => Ok(()),
            };
            if let Err(reason) = recorded {
                lifecycle::abandon_running(pass, reason);
            }
        });
        ptr
    }

    /// A pass running on the backend: counted.
    ///
    /// # Safety
    /// `pass` is this thread's running pass; the rest as `GlobalAlloc::alloc`.
    #[inline]
    unsafe fn alloc_counted(&self, pass: &mut Context, layout: Layout, zeroed: bool) -> *mut u8 {
        // SAFETY: forwarded.
        let ptr = unsafe {
            if pass.pass().interim {
                self.pass_block(pass, layout, zeroed)
            } else {
                self.backend_alloc(layout, zeroed)
            }
        };
        if !ptr.is_null() {
            pass.counters.allocations += 1;
        }
        ptr
    }

    /// Outside passes and in bookkeeping: the backend, or for the allocator's own large
    /// buffers, chunks of the region (see `own_blocks`).
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc` (or `alloc_zeroed` when `zeroed`).
    #[inline(always)]
    unsafe fn alloc_outside(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if own_blocks::wanted(layout) && tls::own_work() {
            let p = own_blocks::alloc(layout); // zero-filled
            if !p.is_null() {
                return p;
            }
        }
        // SAFETY: forwarded.
        unsafe { self.backend_alloc(layout, zeroed) }
    }

    /// A block for context `pass` of a profiled or interim pass (see
    /// `PassState::interim`), not yet recorded: a large one from the context's spares or
    /// the region's chunks (see `own_blocks::PASS_MIN_BYTES`), any other (or when the
    /// region cannot serve it) from the backend.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc` (or `alloc_zeroed` when `zeroed`).
    #[inline(always)]
    unsafe fn pass_block(&self, pass: &mut Context, layout: Layout, zeroed: bool) -> *mut u8 {
        if own_blocks::wanted_in_pass(layout) {
            let p = pass.spares.alloc(layout, zeroed);
            if !p.is_null() {
                return p;
            }
        }
        // SAFETY: forwarded.
        unsafe { self.backend_alloc(layout, zeroed) }
    }

    /// # Safety
    /// As `GlobalAlloc::alloc` (or `alloc_zeroed` when `zeroed`).
    #[inline(always)]
    unsafe fn backend_alloc(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        // SAFETY: forwarded from GlobalAlloc::alloc / alloc_zeroed.
        unsafe {
            if zeroed {
                self.backend.alloc_zeroed(layout)
            } else {
                self.backend.alloc(layout)
            }
        }
    }

    /// # Safety
    /// As `GlobalAlloc::dealloc`, for a backend pointer, on a thread in a profiled pass.
    #[cold]
    unsafe fn dealloc_profiled(&self, ptr: *mut u8, layout: Layout) {
        record_dealloc(ptr);
        // SAFETY: forwarded from GlobalAlloc::dealloc.
        unsafe { self.backend.dealloc(ptr, layout) }
    }

    /// # Safety
    /// As `GlobalAlloc::realloc`, for an own block `ptr` (see `own_blocks`).
    #[cold]
    unsafe fn realloc_own(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (hot, pass) = tls::hot_pass();
        let profiled = hot == Hot::Profile;
        let keeps = keeps_blocks(hot, pass);
        let chunks = |size: usize| geometry::chunks_for(size as u64);
        let new = if chunks(new_size) == chunks(layout.size()) {
            ptr // the same chunks hold it: freed later with `new_size`, same count
        } else {
            let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
                return std::ptr::null_mut();
            };
            // SAFETY: non-zero size (GlobalAlloc::realloc's contract). In a profiled
            // pass the move is recorded below, as a realloc, not as a new allocation.
            // `keeps` only while `pass` is this thread's running pass.
            let new = unsafe {
                if keeps {
                    self.pass_block(&mut *pass, new_layout, false)
                } else {
                    self.alloc_impl(new_layout, false)
                }
            };
            if new.is_null() {
                return new;
            }
            // SAFETY: both blocks are valid for the copied length and distinct; `ptr` is
            // a live own block of `layout.size()` bytes, freed once.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                if !(keeps && (*pass).spares.give(ptr, layout.size())) {
                    own_blocks::free(ptr, layout.size());
                }
            }
            new
        };
        if profiled {
            record_realloc(ptr, new, new_size, layout.align());
        }
        new
    }

    /// Frees own block `ptr` of `size` bytes: recorded in a profiled pass, and kept in
    /// the context's spares, while they have room, in a profiled or interim pass.
    ///
    /// # Safety
    /// As `own_blocks::free`.
    #[inline]
    unsafe fn dealloc_own(&self, ptr: *mut u8, size: usize) {
        let (hot, pass) = tls::hot_pass();
        if hot == Hot::Profile {
            record_dealloc(ptr);
        }
        let keeps = keeps_blocks(hot, pass);
        // SAFETY: `keeps` only while `pass` is this thread's running pass.
        if !(keeps && unsafe { (*pass).spares.give(ptr, size) }) {
            // SAFETY: the caller's.
            unsafe { own_blocks::free(ptr, size) };
        }
    }

    /// A backend block growing to an own block's size while the allocator's own work
    /// runs moves to the region (see `own_blocks`); any other goes to the backend's
    /// realloc.
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc`, for a backend pointer.
    #[cold]
    unsafe fn realloc_outside(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) {
            let new = if own_blocks::wanted(new_layout) && tls::own_work() {
                own_blocks::alloc(new_layout)
            } else {
                std::ptr::null_mut()
            };
            if !new.is_null() {
                // SAFETY: both blocks are valid for the copied length and distinct; `ptr`
                // is a live backend block of `layout`, freed once.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.backend.dealloc(ptr, layout);
                }
                return new;
            }
        }
        // SAFETY: forwarded.
        unsafe { self.backend.realloc(ptr, layout, new_size) }
    }

    /// # Safety
    /// As `GlobalAlloc::realloc`, for a slab pointer `ptr` whose chunk `owner` owns.
    #[cold]
    unsafe fn realloc_slab(
        &self,
        owner: *mut (),
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        // SAFETY: `ptr` is a live slab pointer (GlobalAlloc::realloc's contract).
        if new_size as u64 <= unsafe { replay::capacity(owner, ptr) } {
            return ptr; // grows (or shrinks) in place
        }
        if let (Hot::Replay, pass) = tls::hot_pass() {
            // SAFETY: `hot == Replay`: this thread's running pass; `ptr` is a live slab
            // pointer that outgrew its place.
            if let Some(new) =
                unsafe { replay::lane_grow(&mut *pass, owner, ptr, layout, new_size) }
            {
                return new; // a lane chain moved to a larger cell
            }
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: non-zero size (GlobalAlloc::realloc's contract).
        let new = unsafe { self.backend.alloc(new_layout) };
        if new.is_null() {
            return new;
        }
        if let (Hot::Replay, pass) = tls::hot_pass() {
            // SAFETY: `hot == Replay`: this thread's running pass.
            unsafe {
                (*pass)
                    .counters
                    .miss(MissReason::ReallocGrow, new_size as u64)
            };
        }
        // SAFETY: both blocks are valid for the copied length and distinct; `ptr` is a
        // live slab pointer, freed once.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            replay::free(owner, ptr);
        }
        new
    }

    /// # Safety
    /// As `GlobalAlloc::realloc`, for a backend pointer, on a thread in a profiled pass.
    #[cold]
    unsafe fn realloc_profiled(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded from GlobalAlloc::realloc.
        let new = unsafe { self.backend.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            record_realloc(ptr, new, new_size, layout.align());
        }
        new
    }
}

/// Whether this thread's running pass `pass`, of mode `hot` (as `tls::hot_pass` gives
/// them), keeps its large blocks off the backend: a profiled or interim pass (see
/// `own_blocks`).
#[inline(always)]
fn keeps_blocks(hot: Hot, pass: *mut Context) -> bool {
    match hot {
        Hot::Profile => true,
        // SAFETY: `hot == Counted` only while `pass` is this thread's running pass.
        Hot::Counted => unsafe { (*pass).pass().interim },
        _ => false,
    }
}

/// Has this thread's profiled pass (if one runs) record the free of `ptr`, with the guard
/// set.
#[cold]
fn record_dealloc(ptr: *mut u8) {
    let p = tls::pass();
    // SAFETY: a non-null pass pointer is this thread's running pass.
    if let Some(pass) = unsafe { p.as_mut() } {
        tls::with_bookkeeping(|| {
            if let Some(Err(reason)) = pass.recorder.as_mut().map(|r| r.on_dealloc(ptr)) {
                lifecycle::abandon_running(pass, reason);
            }
        });
    }
}

/// Has this thread's profiled pass (if one runs) record the move of `old` to `new`
/// (`size` bytes, alignment `align`), with the guard set.
#[cold]
fn record_realloc(old: *mut u8, new: *mut u8, size: usize, align: usize) {
    let p = tls::pass();
    // SAFETY: a non-null pass pointer is this thread's running pass.
    if let Some(pass) = unsafe { p.as_mut() } {
        tls::with_bookkeeping(|| {
            let recorded = pass
                .recorder
                .as_mut()
                .map(|r| r.on_realloc(old, new, size as u64, align as u64));
            if let Some(Err(reason)) = recorded {
                lifecycle::abandon_running(pass, reason);
            }
        });
    }
}

// SAFETY: every pointer returned comes either from the backend (with the caller's layout)
// or from a slab slot whose offset is a multiple of the requested alignment (checked
// against the slot's guaranteed alignment) and whose size is at least the requested size,
// and which no other live allocation overlaps (checked before hand-out). Slab pointers are
// never passed to the backend; backend pointers never to the slab.
unsafe impl<B: GlobalAlloc> GlobalAlloc for MemoAlloc<B> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { self.alloc_impl(layout, false) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { self.alloc_impl(layout, true) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(owner) = region::lookup(ptr) {
            if owner == own_blocks::owner() {
                // SAFETY: a live own block, of `layout.size()` bytes.
                return unsafe { self.dealloc_own(ptr, layout.size()) };
            }
            // SAFETY: a live pointer we handed out from a slab, and its chunk's owner.
            return unsafe { replay::free(owner, ptr) };
        }
        match tls::hot() {
            // SAFETY: forwarded.
            Hot::Profile => unsafe { self.dealloc_profiled(ptr, layout) },
            // SAFETY: forwarded.
            _ => unsafe { self.backend.dealloc(ptr, layout) },
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if let Some(owner) = region::lookup(ptr) {
            if owner == own_blocks::owner() {
                // SAFETY: forwarded; `ptr` is a live own block.
                return unsafe { self.realloc_own(ptr, layout, new_size) };
            }
            // SAFETY: forwarded; `ptr` is a live slab pointer of `owner`.
            return unsafe { self.realloc_slab(owner, ptr, layout, new_size) };
        }
        match tls::hot() {
            // SAFETY: forwarded.
            Hot::Profile => unsafe { self.realloc_profiled(ptr, layout, new_size) },
            // SAFETY: forwarded.
            Hot::Backend if new_size >= own_blocks::MIN_BYTES => unsafe {
                self.realloc_outside(ptr, layout, new_size)
            },
            // SAFETY: forwarded.
            _ => unsafe { self.backend.realloc(ptr, layout, new_size) },
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Counting(AtomicU64);

    // SAFETY: forwards to `System`.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.0.fetch_add(1, Ordering::SeqCst);
            // SAFETY: forwarded.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: forwarded.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    static COUNTING: MemoAlloc<Counting> = MemoAlloc::new(Counting(AtomicU64::new(0)));

    /// Serialises the tests that carve own blocks.
    static CARVING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Runs `attempt` until it returns an own block (carving gives up when the region lock
    /// is busy: another test carving a slab), freeing with `undo` what it got instead.
    fn own_block(mut attempt: impl FnMut() -> *mut u8, mut undo: impl FnMut(*mut u8)) -> *mut u8 {
        for _ in 0..1000 {
            let p = attempt();
            if own_blocks::contains(p) {
                return p;
            }
            undo(p);
            std::thread::yield_now();
        }
        panic!("no own block in 1000 attempts");
    }

    /// The allocator's own large buffers come from region chunks, not the backend, and
    /// their chunks go back to the region when freed.
    #[test]
    fn own_work_takes_large_blocks_from_the_region_and_gives_them_back() {
        let _serial = CARVING.lock().unwrap_or_else(|e| e.into_inner());
        static OWN: MemoAlloc<Counting> = MemoAlloc::new(Counting(AtomicU64::new(0)));
        let big = Layout::from_size_align(own_blocks::MIN_BYTES + 1, 64).unwrap();
        let small = Layout::from_size_align(own_blocks::MIN_BYTES - 1, 64).unwrap();
        let is_own = own_blocks::contains;
        // SAFETY (every block below): non-zero sizes; each block is freed once, with the
        // layout it has then.
        tls::with_bookkeeping(|| unsafe {
            let p = own_block(|| OWN.alloc_zeroed(big), |p| OWN.dealloc(p, big));
            assert_eq!((*p, *p.add(big.size() - 1)), (0, 0), "zero-filled");
            p.write_bytes(7, big.size());
            // Within its chunks, a realloc stays in place; past them it moves (to another
            // own block, or to the backend if the lock is busy), keeping the contents.
            let q = OWN.realloc(p, big, 2 * own_blocks::MIN_BYTES);
            assert_eq!(q, p);
            let grown = Layout::from_size_align(geometry::CHUNK + 1, 64).unwrap();
            let r = OWN.realloc(q, big, grown.size());
            assert!(r != q && *r.add(big.size() - 1) == 7);
            OWN.dealloc(r, grown);
            // A backend block growing past the threshold moves to the region.
            let t = own_block(
                || {
                    let s = OWN.alloc(small);
                    assert!(!is_own(s));
                    s.write_bytes(9, small.size());
                    let t = OWN.realloc(s, small, big.size());
                    assert_eq!(*t.add(small.size() - 1), 9);
                    t
                },
                |t| OWN.dealloc(t, big),
            );
            OWN.dealloc(t, big);
        });
        // Outside the allocator's own work, large blocks are the backend's.
        let before = OWN.backend().0.load(Ordering::SeqCst);
        // SAFETY: non-zero size; freed with its layout.
        unsafe {
            let u = OWN.alloc(big);
            assert!(!is_own(u));
            OWN.dealloc(u, big);
        }
        assert_eq!(OWN.backend().0.load(Ordering::SeqCst), before + 1);
    }

    /// Freed own blocks are returned to the region without its lock, then reclaimed by
    /// the next carve: carving and freeing a block over and over does not use up the
    /// region (it would after 32k chunks).
    #[test]
    fn freed_own_blocks_are_reclaimed() {
        let _serial = CARVING.lock().unwrap_or_else(|e| e.into_inner());
        let big = Layout::from_size_align(own_blocks::MIN_BYTES, 8).unwrap();
        let chunks = region::reserved() / geometry::CHUNK;
        tls::with_bookkeeping(|| {
            for _ in 0..chunks.max(1 << 15) + 10 {
                let p = own_blocks::alloc(big);
                if p.is_null() {
                    continue; // the region lock was busy (a slab carved by another test)
                }
                // SAFETY: just allocated with `big`, freed once.
                unsafe { own_blocks::free(p, big.size()) };
            }
            let p = own_blocks::alloc(big);
            assert!(
                !p.is_null(),
                "the region ran out: freed blocks were not reclaimed"
            );
            // SAFETY: as above.
            unsafe { own_blocks::free(p, big.size()) };
        });
    }

    /// Regression: the thread-local fallback of `alloc_in_pass` was evaluated eagerly, so
    /// every allocation in a pass also allocated (and leaked) a backend block, slab hits
    /// included.
    #[test]
    fn an_allocation_in_a_pass_calls_the_backend_at_most_once() {
        let layout = Layout::from_size_align(64, 8).unwrap();
        let calls = || COUNTING.backend().0.load(Ordering::SeqCst);
        let run = || {
            let _p = pass("lib-tests/backend-calls");
            // SAFETY: non-zero size; freed with the same layout.
            unsafe {
                let p = COUNTING.alloc(layout);
                assert!(!p.is_null());
                COUNTING.dealloc(p, layout);
            }
        };
        let n0 = calls();
        run();
        assert!(crate::wait_for_plans(std::time::Duration::from_secs(30)));
        let n1 = calls();
        assert_eq!(
            n1 - n0,
            1,
            "profiled: the backend serves the allocation once"
        );
        run();
        if crate::config::config().mode == Mode::Replay {
            assert_eq!(calls() - n1, 0, "replayed from the slab: no backend call");
        }
    }
}
