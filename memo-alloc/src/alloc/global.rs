//! The `GlobalAlloc` impl and the replayed path: one thread-local read decides, then a
//! replayed request is served from its pass's slab (`replay`), or from the backend as a
//! miss.

use std::alloc::{GlobalAlloc, Layout, System};

use crate::memory::release::BackendKind;
use crate::memory::{own_blocks, region};
use crate::pass::abandon_running;
use crate::pass::context::Context;
use crate::replay::replayer::Replayer;
use crate::replay::{free, hit};
use crate::stats::{AbandonReason, MissReason};
use crate::support::thread::{self, AllocPath};

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
            // SAFETY: a live pointer we handed out from a slab, and its chunk's owner;
            // `replaying` gives this thread's replayed context.
            return unsafe { free::free_from(owner, ptr, replaying) };
        }
        match thread::path() {
            // SAFETY: forwarded.
            path if path.is_slow() => unsafe { self.dealloc_slow(path, ptr, layout) },
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
        match thread::path() {
            // SAFETY: forwarded.
            path if path.is_slow() => unsafe { self.realloc_slow(path, ptr, layout, new_size) },
            // SAFETY: forwarded.
            AllocPath::Backend if new_size >= thread::outside_slow() => unsafe {
                self.realloc_outside(ptr, layout, new_size)
            },
            // SAFETY: forwarded.
            _ => unsafe { self.backend.realloc(ptr, layout, new_size) },
        }
    }
}

/// The replay of this thread's replayed context, if it is in one (for a lane free, see
/// `free::free_from`).
#[inline]
fn replaying<'a>() -> Option<&'a mut Replayer> {
    let (path, pass) = thread::path_and_context();
    // SAFETY: `path == Replay` only while `pass` is this thread's replayed pass, which no
    // caller of the free path holds a reference to (the replay code does not free).
    (path == AllocPath::Replay).then(|| unsafe { &mut (*pass.cast::<Context>()).replay })
}

/// The allocator (**contract**): `MemoAlloc::system()` over the system allocator,
/// `MemoAlloc::jemalloc()` or `MemoAlloc::mimalloc()` over a fast backend (features
/// `jemalloc` and `mimalloc`), or `MemoAlloc::new(backend)` over any other.
///
/// Use one per process, as the `#[global_allocator]`.
pub struct MemoAlloc<B: GlobalAlloc = System> {
    pub(super) backend: B,
    /// Which backend `backend` is, for giving its free memory back (`memory::release`).
    pub(super) kind: BackendKind,
}

impl MemoAlloc<System> {
    /// Over the system allocator (glibc's malloc).
    pub const fn system() -> MemoAlloc<System> {
        MemoAlloc {
            backend: System,
            kind: BackendKind::Other,
        }
    }
}

#[cfg(feature = "jemalloc")]
impl MemoAlloc<super::Jemalloc> {
    /// Over jemalloc (tikv-jemallocator; feature `jemalloc`), its blocks of 2 MiB and
    /// more on advised huge pages ([`crate::Jemalloc`]). jemalloc reads
    /// `_RJEM_MALLOC_CONF` for its settings. When a key's first plan is published, jemalloc's arenas are purged
    /// (`arena.<all>.purge`), so that the profiled pass's freed pages do not stay resident
    /// beside the slab that replays it.
    pub const fn jemalloc() -> MemoAlloc<super::Jemalloc> {
        MemoAlloc {
            backend: super::Jemalloc,
            kind: BackendKind::Jemalloc,
        }
    }
}

#[cfg(feature = "mimalloc")]
impl MemoAlloc<mimalloc::MiMalloc> {
    /// Over mimalloc (the `mimalloc` crate; feature `mimalloc`).
    pub const fn mimalloc() -> MemoAlloc<mimalloc::MiMalloc> {
        MemoAlloc {
            backend: mimalloc::MiMalloc,
            kind: BackendKind::Other,
        }
    }
}

impl<B: GlobalAlloc> MemoAlloc<B> {
    /// Over `backend`, which serves everything that is not served from a slab. Once a
    /// profile is planned, glibc's heaps are trimmed; another backend's free memory is left
    /// to it (`MemoAlloc::jemalloc()` purges jemalloc's arenas).
    pub const fn new(backend: B) -> MemoAlloc<B> {
        MemoAlloc {
            backend,
            kind: BackendKind::Other,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }
}

impl<B: GlobalAlloc> MemoAlloc<B> {
    /// The allocation path: one thread-local read decides between the backend, the slab
    /// and the recorder.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    #[inline(always)]
    pub(super) unsafe fn alloc_impl(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        let (path, pass) = thread::path_and_context();
        let pass = pass.cast::<Context>();
        match path {
            // SAFETY: forwarded from GlobalAlloc::alloc / alloc_zeroed.
            AllocPath::Backend => unsafe { self.alloc_outside(layout, zeroed) },
            // SAFETY: `path == Replay` only while `pass` is this thread's replayed pass.
            AllocPath::Replay => unsafe { self.alloc_replayed(&mut *pass, layout, zeroed) },
            // SAFETY: `path == Counted` only while `pass` is this thread's running pass.
            AllocPath::Counted => unsafe { self.alloc_counted(&mut *pass, layout, zeroed) },
            // SAFETY: forwarded, with `pass` as the thread state holds it.
            _ => unsafe { self.alloc_slow(path, pass, layout, zeroed) },
        }
    }

    /// # Safety
    /// `pass` is this thread's replayed pass; the rest as `GlobalAlloc::alloc`.
    #[inline]
    pub(super) unsafe fn alloc_replayed(
        &self,
        pass: &mut Context,
        layout: Layout,
        zeroed: bool,
    ) -> *mut u8 {
        // SAFETY: `pass` is this thread's replayed pass.
        match unsafe { hit::alloc(pass, layout) } {
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
    /// As [`Self::alloc_replayed`], with `miss` just returned by `hit::alloc`.
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
            unsafe { hit::undo(&mut pass.replay) };
            thread::with_bookkeeping(|| abandon_running(pass, AbandonReason::Panic));
            // SAFETY: forwarded.
            return unsafe { self.backend_alloc(layout, zeroed) };
        }
        // SAFETY: forwarded.
        let ptr = unsafe { self.backend_alloc(layout, zeroed) };
        if ptr.is_null() {
            // SAFETY: right after the miss, on the pass's thread.
            unsafe { hit::undo(&mut pass.replay) };
            return ptr;
        }
        pass.counters.miss(miss, layout.size() as u64);
        ptr
    }

    /// # Safety
    /// As `GlobalAlloc::alloc` (or `alloc_zeroed` when `zeroed`).
    #[inline(always)]
    pub(super) unsafe fn backend_alloc(&self, layout: Layout, zeroed: bool) -> *mut u8 {
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
        if new_size as u64 <= unsafe { free::capacity(owner, ptr) } {
            return ptr; // grows (or shrinks) in place
        }
        if let (AllocPath::Replay, pass) = thread::wanted_and_context() {
            let pass = pass.cast::<Context>();
            // SAFETY: `path == Replay`: this thread's running pass; `ptr` is a live slab
            // pointer that outgrew its place.
            if let Some(new) =
                unsafe { free::lane_grow(&mut (*pass).replay, owner, ptr, layout, new_size) }
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
        if thread::path() == AllocPath::Observe {
            crate::observe::on_alloc(new, new_size, layout.align(), crate::observe::Made::Alloc);
        }
        if let (AllocPath::Replay, pass) = thread::wanted_and_context() {
            let pass = pass.cast::<Context>();
            // SAFETY: `path == Replay`: this thread's running pass.
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
            free::free_from(owner, ptr, replaying);
        }
        new
    }
}
