//! The backend the integration tests run memo over: `System`, jemalloc or mimalloc, as
//! `MEMO_TEST_BACKEND` says (`system`, the default; `jemalloc`; `mimalloc`), so that one
//! build runs the suite over each:
//!
//! ```text
//! MEMO_TEST_BACKEND=jemalloc cargo test -p memo-alloc
//! ```
//!
//! The choice is read with `libc::getenv` (which does not allocate) at the process's first
//! allocation and never changes, so every pointer is freed by the allocator that returned
//! it. [`run_child`](super::run_child) passes the variable on to the children it starts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

use memo_alloc::{Jemalloc, MiMalloc};

/// The variable naming the backend.
pub const BACKEND_ENV: &str = "MEMO_TEST_BACKEND";

const UNSET: u8 = u8::MAX;
const SYSTEM: u8 = 0;
const JEMALLOC: u8 = 1;
const MIMALLOC: u8 = 2;

static CHOSEN: AtomicU8 = AtomicU8::new(UNSET);

/// A backend chosen once per process from [`BACKEND_ENV`].
pub struct Backend;

impl Backend {
    /// The name of the backend this process runs on (`system`, `jemalloc`, `mimalloc`).
    pub fn name() -> &'static str {
        match chosen() {
            JEMALLOC => "jemalloc",
            MIMALLOC => "mimalloc",
            _ => "system",
        }
    }
}

#[inline]
fn chosen() -> u8 {
    match CHOSEN.load(Ordering::Relaxed) {
        UNSET => choose(),
        c => c,
    }
}

/// Reads the variable; racing first calls compute the same value.
#[cold]
fn choose() -> u8 {
    // SAFETY: a NUL-terminated name; the tests do not change this variable while running.
    let p = unsafe { libc::getenv(c"MEMO_TEST_BACKEND".as_ptr()) };
    let c = if p.is_null() {
        SYSTEM
    } else {
        // SAFETY: getenv returns a NUL-terminated string.
        match unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes() {
            b"jemalloc" => JEMALLOC,
            b"mimalloc" => MIMALLOC,
            b"" | b"system" => SYSTEM,
            _ => {
                // An unknown name would silently test the default: refuse it.
                // SAFETY: writing a static message to stderr, then exiting.
                unsafe {
                    let msg = b"MEMO_TEST_BACKEND: want system, jemalloc or mimalloc\n";
                    libc::write(2, msg.as_ptr().cast(), msg.len());
                    libc::_exit(2)
                }
            }
        }
    };
    CHOSEN.store(c, Ordering::Relaxed);
    c
}

// SAFETY: every call goes to the one allocator chosen for the whole process, with the
// caller's arguments unchanged, so each pointer is freed or reallocated by the allocator
// that returned it.
unsafe impl GlobalAlloc for Backend {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            match chosen() {
                JEMALLOC => Jemalloc.alloc(layout),
                MIMALLOC => MiMalloc.alloc(layout),
                _ => System.alloc(layout),
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            match chosen() {
                JEMALLOC => Jemalloc.alloc_zeroed(layout),
                MIMALLOC => MiMalloc.alloc_zeroed(layout),
                _ => System.alloc_zeroed(layout),
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded to the allocator that returned `ptr`.
        unsafe {
            match chosen() {
                JEMALLOC => Jemalloc.dealloc(ptr, layout),
                MIMALLOC => MiMalloc.dealloc(ptr, layout),
                _ => System.dealloc(ptr, layout),
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded to the allocator that returned `ptr`.
        unsafe {
            match chosen() {
                JEMALLOC => Jemalloc.realloc(ptr, layout, new_size),
                MIMALLOC => MiMalloc.realloc(ptr, layout, new_size),
                _ => System.realloc(ptr, layout, new_size),
            }
        }
    }
}
