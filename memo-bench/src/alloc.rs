//! The benchmark's global allocator: one static that dispatches to the allocator chosen for
//! this process.
//!
//! The choice is read from the environment variable [`ALLOCATOR_ENV`] with `libc::getenv`
//! (which does not allocate) at the very first allocation of the process, before the Rust
//! runtime or `main` allocate anything, and never changes afterwards. So every pointer the
//! process ever frees or reallocates was allocated by the allocator that frees it: frees
//! are routed correctly without any per-pointer bookkeeping. The parent process sets the
//! variable for each child; without it a process runs on glibc.
//!
//! `jemalloc` and `jemalloc-tuned` are the same static allocator: the tuned configuration
//! reaches jemalloc through `_RJEM_MALLOC_CONF` in the child's environment (see
//! [`crate::harness::jemalloc_conf`]) and is checked from inside the child by reading
//! `opt.oversize_threshold` back.
//!
//! `memo` is memo-alloc over its default backend ([`MEMO_BACKEND`]); `memo-glibc`,
//! `memo-jemalloc` and `memo-mimalloc` name their backend. `static` serves what its arena
//! does not hold from memo's default backend too.
//!
//! In memo cells every allocation (not reallocations) also goes through
//! [`pass_count::on_alloc`], which counts the allocations made during passes on any thread;
//! the other allocators' paths are untouched.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU8, Ordering};

use memo_alloc::{Jemalloc, MemoAlloc, MiMalloc};

use crate::arena;
use crate::backend::{Backend, MEMO_BACKEND};
use crate::pass_count;

/// Environment variable naming the allocator of a process.
pub const ALLOCATOR_ENV: &str = "MEMO_BENCH_ALLOCATOR";
const ALLOCATOR_ENV_C: &std::ffi::CStr = c"MEMO_BENCH_ALLOCATOR";

/// The allocators compared, with their report names (also the values of the command
/// line's `--allocators`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
#[repr(u8)]
pub enum Allocator {
    /// `std::alloc::System` (glibc malloc).
    Glibc = 0,
    /// `tikv-jemallocator` with jemalloc's defaults.
    Jemalloc = 1,
    /// `tikv-jemallocator` with the thesis's configuration (oversize threshold 1 MiB).
    JemallocTuned = 2,
    /// The `mimalloc` crate (mimalloc v3).
    Mimalloc = 3,
    /// memomalloc over its default backend ([`MEMO_BACKEND`]).
    Memo = 4,
    /// memomalloc over glibc (`MemoAlloc::system()`).
    MemoGlibc = 5,
    /// memomalloc over jemalloc, default configuration (`MemoAlloc::jemalloc()`).
    MemoJemalloc = 6,
    /// memomalloc over mimalloc (`MemoAlloc::mimalloc()`).
    MemoMimalloc = 7,
    /// An ahead-of-time arena serving each thread's recorded pass unchecked, the rest
    /// from memo's default backend (the `arena` module).
    Static = 8,
    /// memomalloc over its default backend without lanes (`MEMO_LANES=0`): every request
    /// replays from a planned slot, small ones too.
    MemoSlots = 9,
}

impl Allocator {
    /// Every allocator, in report order.
    pub const ALL: [Allocator; 10] = [
        Allocator::Glibc,
        Allocator::Jemalloc,
        Allocator::JemallocTuned,
        Allocator::Mimalloc,
        Allocator::Memo,
        Allocator::MemoGlibc,
        Allocator::MemoJemalloc,
        Allocator::MemoMimalloc,
        Allocator::Static,
        Allocator::MemoSlots,
    ];

    /// The allocators a run compares unless told otherwise: all but `memo-slots` (a
    /// setting of memo, compared on request: `--allocators memo,memo-slots,...`) and the
    /// `memo-<backend>` row that is `memo` itself (naming both runs memo twice: a check
    /// of the benchmark's noise, whose verdict should be level).
    pub fn defaults() -> Vec<Allocator> {
        Allocator::ALL
            .into_iter()
            .filter(|&a| a != Allocator::MemoSlots && !a.duplicates_memo())
            .collect()
    }

    /// Whether this is the `memo-<backend>` row of memo's default backend.
    pub fn duplicates_memo(self) -> bool {
        self != Allocator::Memo && self.is_memo() && self.backend() == MEMO_BACKEND
    }

    /// Report name (`glibc`, `jemalloc`, `jemalloc-tuned`, `mimalloc`, `memo`,
    /// `memo-glibc`, `memo-jemalloc`, `memo-mimalloc`, `static`, `memo-slots`).
    pub fn name(self) -> &'static str {
        match self {
            Allocator::Glibc => "glibc",
            Allocator::Jemalloc => "jemalloc",
            Allocator::JemallocTuned => "jemalloc-tuned",
            Allocator::Mimalloc => "mimalloc",
            Allocator::Memo => "memo",
            Allocator::MemoGlibc => "memo-glibc",
            Allocator::MemoJemalloc => "memo-jemalloc",
            Allocator::MemoMimalloc => "memo-mimalloc",
            Allocator::Static => "static",
            Allocator::MemoSlots => "memo-slots",
        }
    }

    /// Parses a report name.
    pub fn parse(s: &str) -> Option<Allocator> {
        Allocator::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Whether this is a memomalloc variant (passes and op scopes are used).
    pub fn is_memo(self) -> bool {
        matches!(
            self,
            Allocator::Memo
                | Allocator::MemoGlibc
                | Allocator::MemoJemalloc
                | Allocator::MemoMimalloc
                | Allocator::MemoSlots
        )
    }

    /// The general-purpose allocator that serves this allocator's requests (for memo and
    /// static: those not served from a slab or the arena).
    pub fn backend(self) -> Backend {
        match self {
            Allocator::Glibc | Allocator::MemoGlibc => Backend::Glibc,
            Allocator::Jemalloc | Allocator::JemallocTuned | Allocator::MemoJemalloc => {
                Backend::Jemalloc
            }
            Allocator::Mimalloc | Allocator::MemoMimalloc => Backend::Mimalloc,
            Allocator::Memo | Allocator::MemoSlots | Allocator::Static => MEMO_BACKEND,
        }
    }

    /// Whether jemalloc serves (some of) the allocations.
    pub fn uses_jemalloc(self) -> bool {
        self.backend() == Backend::Jemalloc
    }
}

const UNSET: u8 = u8::MAX;
static SELECTED: AtomicU8 = AtomicU8::new(UNSET);

static MEMO_GLIBC: MemoAlloc = MemoAlloc::system();
static MEMO_JEMALLOC: MemoAlloc<Jemalloc> = MemoAlloc::jemalloc();
static MEMO_MIMALLOC: MemoAlloc<MiMalloc> = MemoAlloc::mimalloc();

/// The allocator of this process (decided at its first allocation).
pub fn selected() -> Allocator {
    let v = which();
    Allocator::ALL
        .into_iter()
        .find(|&a| a as u8 == v)
        .unwrap_or(Allocator::Glibc)
}

#[inline(always)]
fn which() -> u8 {
    let v = SELECTED.load(Ordering::Relaxed);
    if v != UNSET {
        v
    } else {
        init()
    }
}

/// Reads the choice from the environment without allocating. Racing first calls compute
/// the same value from the same environment.
#[cold]
fn init() -> u8 {
    // SAFETY: getenv with a NUL-terminated name; the environment is not modified
    // concurrently this early (and the benchmark never modifies its own environment).
    let p = unsafe { libc::getenv(ALLOCATOR_ENV_C.as_ptr()) };
    let v = if p.is_null() {
        Allocator::Glibc as u8
    } else {
        // SAFETY: getenv returns a NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
        Allocator::ALL
            .into_iter()
            .find(|a| a.name().as_bytes() == s)
            .map_or(Allocator::Glibc as u8, |a| a as u8)
    };
    SELECTED.store(v, Ordering::Relaxed);
    v
}

const GLIBC: u8 = Allocator::Glibc as u8;
const JEMALLOC: u8 = Allocator::Jemalloc as u8;
const JEMALLOC_TUNED: u8 = Allocator::JemallocTuned as u8;
const MIMALLOC: u8 = Allocator::Mimalloc as u8;
const MEMO: u8 = Allocator::Memo as u8;
const MEMO_SLOTS: u8 = Allocator::MemoSlots as u8;
const MEMO_ON_GLIBC: u8 = Allocator::MemoGlibc as u8;
const MEMO_ON_JEMALLOC: u8 = Allocator::MemoJemalloc as u8;
const MEMO_ON_MIMALLOC: u8 = Allocator::MemoMimalloc as u8;
const STATIC: u8 = Allocator::Static as u8;

/// What serves a request: a general-purpose allocator, memo over one, or the arena.
#[derive(Clone, Copy)]
enum Route {
    Plain(Backend),
    Memo(Backend),
    Arena,
}

/// The route of the selected allocator (`memo` and `memo-slots` over [`MEMO_BACKEND`], a
/// constant: the match folds).
#[inline(always)]
fn route() -> Route {
    match which() {
        JEMALLOC | JEMALLOC_TUNED => Route::Plain(Backend::Jemalloc),
        MIMALLOC => Route::Plain(Backend::Mimalloc),
        MEMO | MEMO_SLOTS => Route::Memo(MEMO_BACKEND),
        MEMO_ON_GLIBC => Route::Memo(Backend::Glibc),
        MEMO_ON_JEMALLOC => Route::Memo(Backend::Jemalloc),
        MEMO_ON_MIMALLOC => Route::Memo(Backend::Mimalloc),
        STATIC => Route::Arena,
        GLIBC => Route::Plain(Backend::Glibc),
        _ => Route::Plain(Backend::Glibc),
    }
}

/// memo over `backend`: `alloc` (`zeroed`: `alloc_zeroed`), counted by [`pass_count`].
///
/// # Safety
/// As `GlobalAlloc::alloc`.
#[inline(always)]
unsafe fn memo_alloc(backend: Backend, layout: Layout, zeroed: bool) -> *mut u8 {
    pass_count::on_alloc();
    // SAFETY: forwarded.
    unsafe {
        match (backend, zeroed) {
            (Backend::Glibc, false) => MEMO_GLIBC.alloc(layout),
            (Backend::Glibc, true) => MEMO_GLIBC.alloc_zeroed(layout),
            (Backend::Jemalloc, false) => MEMO_JEMALLOC.alloc(layout),
            (Backend::Jemalloc, true) => MEMO_JEMALLOC.alloc_zeroed(layout),
            (Backend::Mimalloc, false) => MEMO_MIMALLOC.alloc(layout),
            (Backend::Mimalloc, true) => MEMO_MIMALLOC.alloc_zeroed(layout),
        }
    }
}

/// The dispatching global allocator.
pub struct Dispatch;

// SAFETY: every call is forwarded to one allocator, the same for the whole life of the
// process (see the module documentation), so each pointer is freed or reallocated by the
// allocator that returned it, with the layout the caller passes through unchanged.
unsafe impl GlobalAlloc for Dispatch {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            match route() {
                Route::Plain(b) => b.alloc(layout, false),
                Route::Memo(b) => memo_alloc(b, layout, false),
                Route::Arena => arena::alloc(layout, false),
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            match route() {
                Route::Plain(b) => b.alloc(layout, true),
                Route::Memo(b) => memo_alloc(b, layout, true),
                Route::Arena => arena::alloc(layout, true),
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from the same allocator (module documentation).
        unsafe {
            match route() {
                Route::Plain(b) => b.dealloc(ptr, layout),
                Route::Memo(Backend::Glibc) => MEMO_GLIBC.dealloc(ptr, layout),
                Route::Memo(Backend::Jemalloc) => MEMO_JEMALLOC.dealloc(ptr, layout),
                Route::Memo(Backend::Mimalloc) => MEMO_MIMALLOC.dealloc(ptr, layout),
                Route::Arena => arena::dealloc(ptr, layout),
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded; `ptr` came from the same allocator (module documentation).
        unsafe {
            match route() {
                Route::Plain(b) => b.realloc(ptr, layout, new_size),
                Route::Memo(Backend::Glibc) => MEMO_GLIBC.realloc(ptr, layout, new_size),
                Route::Memo(Backend::Jemalloc) => MEMO_JEMALLOC.realloc(ptr, layout, new_size),
                Route::Memo(Backend::Mimalloc) => MEMO_MIMALLOC.realloc(ptr, layout, new_size),
                Route::Arena => arena::realloc(ptr, layout, new_size),
            }
        }
    }
}

/// jemalloc's `opt.oversize_threshold` as this process sees it (`None` when jemalloc does
/// not serve this process).
pub fn jemalloc_oversize_threshold() -> Option<u64> {
    if !selected().uses_jemalloc() {
        return None;
    }
    // SAFETY: the name is NUL-terminated and `opt.oversize_threshold` is a size_t.
    unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"opt.oversize_threshold\0") }
        .ok()
        .map(|v| v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_slots_is_compared_only_when_asked_for() {
        assert_eq!(Allocator::parse("memo-slots"), Some(Allocator::MemoSlots));
        assert_eq!(
            Allocator::parse("memo-lanes"),
            None,
            "lanes are memo's default"
        );
        assert!(!Allocator::defaults().contains(&Allocator::MemoSlots));
        assert!(Allocator::MemoSlots.is_memo());
        let env = crate::harness::memo_env(Allocator::MemoSlots);
        assert_eq!(env, Some(("MEMO_LANES", "0")));
        assert_eq!(crate::harness::memo_env(Allocator::Memo), None);
    }

    #[test]
    fn memo_runs_over_its_default_backend_and_every_backend_has_a_memo_row() {
        for b in Backend::ALL {
            let row = Allocator::parse(&format!("memo-{}", b.name())).expect("a memo row");
            assert!(row.is_memo() && row.backend() == b);
            // The row that is memo itself is not run twice unless asked for.
            assert_eq!(Allocator::defaults().contains(&row), b != MEMO_BACKEND);
        }
        for a in [Allocator::Memo, Allocator::MemoSlots, Allocator::Static] {
            assert_eq!(a.backend(), MEMO_BACKEND, "{a:?}");
        }
        let defaults = Allocator::defaults();
        assert_eq!(defaults.len(), Allocator::ALL.len() - 2);
        assert!(defaults.contains(&Allocator::Memo) && defaults.contains(&Allocator::Static));
    }
}
