//! The general-purpose allocators memo runs over, and the one the `memo` row (and
//! `memo-slots` and `static`) uses: [`MEMO_BACKEND`], the one line to change when memo's
//! default backend changes.
//!
//! The rows of the allocators alone run them as they come ([`Backend::alloc`]: jemalloc
//! with its defaults). memo runs over memo-alloc's backends, whose jemalloc page-aligns
//! large blocks (`memo_alloc::Jemalloc`); `static` serves what its arena does not hold
//! from that same backend ([`memo_backend_alloc`]), so that memo / static compares
//! matching and checks alone, not two general-purpose allocators.

use std::alloc::{GlobalAlloc, Layout, System};

use memo_alloc::MiMalloc;
use tikv_jemallocator::Jemalloc;

/// A general-purpose allocator memo can run over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// glibc's malloc (`std::alloc::System`).
    Glibc,
    /// jemalloc with its defaults (tikv-jemallocator).
    Jemalloc,
    /// mimalloc (the `mimalloc` crate, mimalloc v3).
    Mimalloc,
}

/// The backend of the `memo` row: memo-alloc's recommended default.
pub const MEMO_BACKEND: Backend = Backend::Jemalloc;

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 3] = [Backend::Glibc, Backend::Jemalloc, Backend::Mimalloc];

    /// Name (`glibc`, `jemalloc`, `mimalloc`), as in the allocators' names.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Glibc => "glibc",
            Backend::Jemalloc => "jemalloc",
            Backend::Mimalloc => "mimalloc",
        }
    }

    /// `GlobalAlloc::alloc` (`zeroed`: `alloc_zeroed`) of this backend.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    #[inline(always)]
    pub unsafe fn alloc(self, layout: Layout, zeroed: bool) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            match (self, zeroed) {
                (Backend::Glibc, false) => System.alloc(layout),
                (Backend::Glibc, true) => System.alloc_zeroed(layout),
                (Backend::Jemalloc, false) => Jemalloc.alloc(layout),
                (Backend::Jemalloc, true) => Jemalloc.alloc_zeroed(layout),
                (Backend::Mimalloc, false) => MiMalloc.alloc(layout),
                (Backend::Mimalloc, true) => MiMalloc.alloc_zeroed(layout),
            }
        }
    }

    /// `GlobalAlloc::dealloc` of this backend.
    ///
    /// # Safety
    /// As `GlobalAlloc::dealloc`, for a block this backend returned.
    #[inline(always)]
    pub unsafe fn dealloc(self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe {
            match self {
                Backend::Glibc => System.dealloc(ptr, layout),
                Backend::Jemalloc => Jemalloc.dealloc(ptr, layout),
                Backend::Mimalloc => MiMalloc.dealloc(ptr, layout),
            }
        }
    }

    /// `GlobalAlloc::realloc` of this backend.
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc`, for a block this backend returned.
    #[inline(always)]
    pub unsafe fn realloc(self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            match self {
                Backend::Glibc => System.realloc(ptr, layout, new_size),
                Backend::Jemalloc => Jemalloc.realloc(ptr, layout, new_size),
                Backend::Mimalloc => MiMalloc.realloc(ptr, layout, new_size),
            }
        }
    }
}

/// `GlobalAlloc::alloc` (`zeroed`: `alloc_zeroed`) of [`MEMO_BACKEND`] as memo-alloc runs
/// it (jemalloc: `memo_alloc::Jemalloc`, its blocks of 2 MiB and more on huge pages).
///
/// # Safety
/// As `GlobalAlloc::alloc`.
#[inline(always)]
pub unsafe fn memo_backend_alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    // SAFETY: forwarded.
    unsafe {
        match (MEMO_BACKEND, zeroed) {
            (Backend::Jemalloc, false) => memo_alloc::Jemalloc.alloc(layout),
            (Backend::Jemalloc, true) => memo_alloc::Jemalloc.alloc_zeroed(layout),
            (b, zeroed) => b.alloc(layout, zeroed),
        }
    }
}

/// `GlobalAlloc::dealloc` of [`MEMO_BACKEND`] as memo-alloc runs it.
///
/// # Safety
/// As `GlobalAlloc::dealloc`, for a block [`memo_backend_alloc`] or
/// [`memo_backend_realloc`] returned.
#[inline(always)]
pub unsafe fn memo_backend_dealloc(ptr: *mut u8, layout: Layout) {
    // SAFETY: forwarded.
    unsafe {
        match MEMO_BACKEND {
            Backend::Jemalloc => memo_alloc::Jemalloc.dealloc(ptr, layout),
            b => b.dealloc(ptr, layout),
        }
    }
}

/// `GlobalAlloc::realloc` of [`MEMO_BACKEND`] as memo-alloc runs it.
///
/// # Safety
/// As `GlobalAlloc::realloc`, for a block [`memo_backend_alloc`] or
/// [`memo_backend_realloc`] returned.
#[inline(always)]
pub unsafe fn memo_backend_realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: forwarded.
    unsafe {
        match MEMO_BACKEND {
            Backend::Jemalloc => memo_alloc::Jemalloc.realloc(ptr, layout, new_size),
            b => b.realloc(ptr, layout, new_size),
        }
    }
}
