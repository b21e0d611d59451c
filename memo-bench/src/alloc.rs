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
//! In memo cells every allocation (not reallocations) also goes through
//! [`pass_count::on_alloc`], which counts the allocations made during passes on any thread;
//! the other allocators' paths are untouched.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

use memo_alloc::MemoAlloc;

use crate::arena;
use crate::pass_count;
use mimalloc::MiMalloc;
use tikv_jemallocator::Jemalloc;

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
    /// memomalloc over `System`.
    Memo = 4,
    /// memomalloc over jemalloc (default configuration).
    MemoJemalloc = 5,
    /// An ahead-of-time arena serving each thread's recorded pass unchecked, over glibc
    /// (the `arena` module).
    Static = 6,
    /// memomalloc over `System` without lanes (`MEMO_LANES=0`): every request replays
    /// from a planned slot, small ones too.
    MemoSlots = 7,
}

impl Allocator {
    /// Every allocator, in report order.
    pub const ALL: [Allocator; 8] = [
        Allocator::Glibc,
        Allocator::Jemalloc,
        Allocator::JemallocTuned,
        Allocator::Mimalloc,
        Allocator::Memo,
        Allocator::MemoJemalloc,
        Allocator::Static,
        Allocator::MemoSlots,
    ];

    /// The allocators a run compares unless told otherwise: all but `memo-slots` (a
    /// setting of memo, compared on request: `--allocators memo,memo-slots,...`), which
    /// comes last in [`Allocator::ALL`].
    pub const DEFAULT: &'static [Allocator] = Allocator::ALL.split_at(7).0;

    /// Report name (`glibc`, `jemalloc`, `jemalloc-tuned`, `mimalloc`, `memo`, `memo-jemalloc`,
    /// `static`, `memo-slots`).
    pub fn name(self) -> &'static str {
        match self {
            Allocator::Glibc => "glibc",
            Allocator::Jemalloc => "jemalloc",
            Allocator::JemallocTuned => "jemalloc-tuned",
            Allocator::Mimalloc => "mimalloc",
            Allocator::Memo => "memo",
            Allocator::MemoJemalloc => "memo-jemalloc",
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
            Allocator::Memo | Allocator::MemoJemalloc | Allocator::MemoSlots
        )
    }

    /// Whether jemalloc serves (some of) the allocations.
    pub fn uses_jemalloc(self) -> bool {
        matches!(
            self,
            Allocator::Jemalloc | Allocator::JemallocTuned | Allocator::MemoJemalloc
        )
    }
}

const UNSET: u8 = u8::MAX;
static SELECTED: AtomicU8 = AtomicU8::new(UNSET);

static MEMO_SYSTEM: MemoAlloc = MemoAlloc::system();
static MEMO_JEMALLOC: MemoAlloc<Jemalloc> = MemoAlloc::new(Jemalloc);

/// The allocator of this process (decided at its first allocation).
pub fn selected() -> Allocator {
    match which() {
        1 => Allocator::Jemalloc,
        2 => Allocator::JemallocTuned,
        3 => Allocator::Mimalloc,
        4 => Allocator::Memo,
        5 => Allocator::MemoJemalloc,
        6 => Allocator::Static,
        7 => Allocator::MemoSlots,
        _ => Allocator::Glibc,
    }
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
        0
    } else {
        // SAFETY: getenv returns a NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
        Allocator::ALL
            .into_iter()
            .find(|a| a.name().as_bytes() == s)
            .map_or(0, |a| a as u8)
    };
    SELECTED.store(v, Ordering::Relaxed);
    v
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
            match which() {
                1 | 2 => Jemalloc.alloc(layout),
                3 => MiMalloc.alloc(layout),
                4 | 7 => {
                    pass_count::on_alloc();
                    MEMO_SYSTEM.alloc(layout)
                }
                5 => {
                    pass_count::on_alloc();
                    MEMO_JEMALLOC.alloc(layout)
                }
                6 => arena::alloc(layout, false),
                _ => System.alloc(layout),
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            match which() {
                1 | 2 => Jemalloc.alloc_zeroed(layout),
                3 => MiMalloc.alloc_zeroed(layout),
                4 | 7 => {
                    pass_count::on_alloc();
                    MEMO_SYSTEM.alloc_zeroed(layout)
                }
                5 => {
                    pass_count::on_alloc();
                    MEMO_JEMALLOC.alloc_zeroed(layout)
                }
                6 => arena::alloc(layout, true),
                _ => System.alloc_zeroed(layout),
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from the same allocator (module documentation).
        unsafe {
            match which() {
                1 | 2 => Jemalloc.dealloc(ptr, layout),
                3 => MiMalloc.dealloc(ptr, layout),
                4 | 7 => MEMO_SYSTEM.dealloc(ptr, layout),
                5 => MEMO_JEMALLOC.dealloc(ptr, layout),
                6 => arena::dealloc(ptr, layout),
                _ => System.dealloc(ptr, layout),
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded; `ptr` came from the same allocator (module documentation).
        unsafe {
            match which() {
                1 | 2 => Jemalloc.realloc(ptr, layout, new_size),
                3 => MiMalloc.realloc(ptr, layout, new_size),
                4 | 7 => MEMO_SYSTEM.realloc(ptr, layout, new_size),
                5 => MEMO_JEMALLOC.realloc(ptr, layout, new_size),
                6 => arena::realloc(ptr, layout, new_size),
                _ => System.realloc(ptr, layout, new_size),
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
        assert!(!Allocator::DEFAULT.contains(&Allocator::MemoSlots));
        assert_eq!(Allocator::DEFAULT.len() + 1, Allocator::ALL.len());
        assert!(Allocator::MemoSlots.is_memo());
        let env = crate::harness::memo_env(Allocator::MemoSlots);
        assert_eq!(env, Some(("MEMO_LANES", "0")));
        assert_eq!(crate::harness::memo_env(Allocator::Memo), None);
    }
}
