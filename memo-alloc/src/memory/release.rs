//! Giving the backend's free memory back to the OS once a profile is planned.
//!
//! A profiled pass runs on the backend: its buffers are freed when it ends, and the
//! recorder's and the planner's buffers when the plan is published. A general-purpose
//! allocator keeps freed memory resident for reuse (glibc in its arenas until a trim,
//! jemalloc as dirty pages for about 10 s), while the key's passes now run on slabs: the
//! pass's memory would be resident twice, once in the backend and once in the slab.
//! [`release_free_memory`] returns it: glibc's heaps with `malloc_trim`, and, where the
//! allocator's backend is jemalloc ([`note_backend`] told so) and the caller asks for it
//! (the planner, when a key's passes move from the backend to slabs), every jemalloc
//! arena's dirty and muzzy pages with the `arena.<all>.purge` mallctl, after which the
//! 2 MiB pages a model's weights fill are collapsed into huge pages again
//! (`startup_pages.rs`: the purge splits them where it returns free ranges inside them).
//! Before that, the calling thread's jemalloc cache of free blocks goes back to the arenas
//! ([`flush_thread_cache`], also at the end of a pass that ran on the backend), so that the
//! purge reaches the pages of the blocks the thread freed. It runs off the allocation paths
//! (on the planner thread, or where a pass ends with inline planning).
//!
//! It may use `support` and its sibling `startup_pages` only.

use crate::support::sync::plain::AtomicBool;
use crate::support::sync::Ordering;

/// Which allocator serves as the backend, as far as giving memory back goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackendKind {
    /// glibc's malloc, or a backend this module knows nothing of: only glibc's heaps are
    /// trimmed.
    Other,
    /// jemalloc (tikv-jemallocator): its arenas are purged as well.
    #[cfg(feature = "jemalloc")]
    Jemalloc,
}

/// Set once a thread of an allocator over jemalloc made its first call.
static JEMALLOC_SERVES: AtomicBool = AtomicBool::new(false);

/// Notes the allocator's backend (at a thread's first call, off the fast paths): the
/// next [`release_free_memory`] purges jemalloc's arenas once jemalloc serves. Neither
/// allocates nor locks.
#[inline]
pub(crate) fn note_backend(kind: BackendKind) {
    #[cfg(feature = "jemalloc")]
    if kind == BackendKind::Jemalloc && !JEMALLOC_SERVES.load(Ordering::Relaxed) {
        JEMALLOC_SERVES.store(true, Ordering::Relaxed);
    }
    let _ = kind;
}

/// Whether jemalloc serves as the backend (a thread of an allocator over jemalloc made
/// its first call).
pub(crate) fn jemalloc_serves() -> bool {
    JEMALLOC_SERVES.load(Ordering::Relaxed)
}

/// Returns the backend's free memory to the OS: glibc's heaps are trimmed (`malloc_trim`;
/// nothing when glibc holds nothing), and, with `purge_arenas`, jemalloc's arenas are
/// purged when jemalloc serves. Takes the backends' own locks; allocates nothing through
/// the allocator.
pub(crate) fn release_free_memory(purge_arenas: bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(loom), not(miri)))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
    // The calling thread (the planner, or a pass's thread planning inline) freed its
    // work's blocks into its thread cache: back to their arenas, so that the purge (or
    // jemalloc's decay) can return their pages.
    flush_thread_cache();
    if purge_arenas && jemalloc_serves() {
        purge_jemalloc();
        // The purge split the huge pages of a model's weights where it returned free
        // ranges inside them: they are made huge again.
        #[cfg(feature = "jemalloc")]
        super::startup_pages::collapse_covered();
    }
}

/// Returns the free blocks the calling thread's jemalloc cache holds to their arenas
/// (`thread.tcache.flush`), when jemalloc serves.
///
/// A thread cache keeps freed blocks (of up to 32 KiB, by default) for the thread's next
/// requests, and gives them back only as the thread goes on allocating from jemalloc. A
/// thread that moves to slabs, or parks (the planner between jobs), would keep them, and
/// with them the pages they lie in, which no purge can return: after planning candle's
/// MobileNetV4 the process held 0.8 MiB more without the planner's flush. Called where a
/// thread's work on the backend ends: [`release_free_memory`], and the end of a profiled
/// pass or of a backend pass whose key's plan came meanwhile (`pass::finish`); off the
/// allocation paths. Takes jemalloc's own locks; allocates nothing through the allocator.
pub(crate) fn flush_thread_cache() {
    if jemalloc_serves() {
        // Moves only the calling thread's cached free blocks back to their arenas.
        jemalloc_command(c"thread.tcache.flush");
    }
}

/// `arena.<MALLCTL_ARENAS_ALL>.purge`: every arena's unused dirty and muzzy pages go back
/// to the OS (`MADV_DONTNEED`); memory jemalloc hands out is untouched.
fn purge_jemalloc() {
    // `MALLCTL_ARENAS_ALL` (4096) names every arena at once.
    jemalloc_command(c"arena.4096.purge");
}

/// Runs the jemalloc control `name`, one that neither reads nor writes a value. A failure
/// (an error code) changes nothing, and is ignored.
#[cfg(all(feature = "jemalloc", not(loom), not(miri)))]
fn jemalloc_command(name: &std::ffi::CStr) {
    // SAFETY: a NUL-terminated mallctl name; a control that neither reads nor writes a
    // value takes null old and new pointers and zero lengths.
    let _ = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
}

#[cfg(not(all(feature = "jemalloc", not(loom), not(miri))))]
fn jemalloc_command(_name: &std::ffi::CStr) {}
