//! One reserved virtual region for every slab: "is this a slab pointer?" is one
//! subtraction and one compare ([`lookup`]), and a 2 MiB chunk directory maps any slab
//! pointer to the object that owns its chunk (a slab instance; opaque here) in O(1).
//!
//! The region is mapped `PROT_READ | PROT_WRITE` with `MAP_NORESERVE`: nothing is
//! committed until touched. Chunks are carved at pass boundaries under the
//! [`LockId::Region`] lock (never on the allocation path) and returned with
//! `madvise(MADV_DONTNEED)`. Under `cfg(loom)` slabs come from the heap instead. Under
//! `cfg(miri)` (no `mmap` of this size, no `madvise`) the region is a smaller heap buffer
//! aligned to a chunk, and returned pages are zeroed ([`discard`]); everything else is the
//! same code.

use std::ptr;

use crate::memory::geometry::{chunks_for, CHUNK, CHUNK_SHIFT, PAGE};
#[cfg(not(loom))]
use crate::memory::run_stack::RunStack;
use crate::support::sync::{plain, LockId, Ordering, SpinLock};

/// Chunks in the largest region (64 GiB).
const MAX_CHUNKS: usize = 1 << 15;

static BASE: plain::AtomicUsize = plain::AtomicUsize::new(0);
static LEN: plain::AtomicUsize = plain::AtomicUsize::new(0);
static DIRECTORY: [plain::AtomicPtr<()>; MAX_CHUNKS] =
    [const { plain::AtomicPtr::new(ptr::null_mut()) }; MAX_CHUNKS];

/// Guards chunk carving and release (and, in `slab`, pool growth).
pub(crate) static LOCK: SpinLock = SpinLock::new(LockId::Region);

/// Which chunks are carved; only touched with [`LOCK`] held.
struct Used(std::cell::UnsafeCell<[u64; MAX_CHUNKS / 64]>);

// SAFETY: only accessed with `LOCK` held.
unsafe impl Sync for Used {}

static USED: Used = Used(std::cell::UnsafeCell::new([0; MAX_CHUNKS / 64]));

/// For a slab pointer, `Some` of the owner of its chunk (null only for a chunk no slab
/// owns); `None` for any other pointer. One region check and one directory load.
#[inline(always)]
pub(crate) fn lookup(p: *mut u8) -> Option<*mut ()> {
    let len = LEN.load(Ordering::Acquire);
    let offset = (p as usize).wrapping_sub(BASE.load(Ordering::Relaxed));
    if offset >= len {
        return None;
    }
    Some(
        DIRECTORY
            .get(offset >> CHUNK_SHIFT)
            .map_or(ptr::null_mut(), |slot| slot.load(Ordering::Acquire)),
    )
}

/// Bytes of address space reserved for slabs.
pub(crate) fn reserved() -> usize {
    LEN.load(Ordering::Acquire)
}

/// Reserves the region on first use; `false` if no size could be reserved.
#[cfg(not(any(loom, miri)))]
fn ensure_reserved() -> bool {
    if LEN.load(Ordering::Acquire) != 0 {
        return true;
    }
    for gib in [64usize, 16, 4, 1] {
        let len = gib << 30;
        // One chunk more than used, so that the region can start on a chunk boundary: every
        // slab base is then 2 MiB-aligned and slots honour any alignment up to that.
        // SAFETY: an anonymous private mapping at an address of the kernel's choice
        // touches no existing memory.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len + CHUNK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            continue;
        }
        // Transparent huge pages would commit 2 MiB per touch and make a slab's resident
        // size overshoot its plan; slabs opt out. Failure is harmless.
        // SAFETY: `p..p+len+CHUNK` is the mapping just created.
        unsafe {
            libc::madvise(p, len + CHUNK, libc::MADV_NOHUGEPAGE);
        }
        let base = (p as usize).next_multiple_of(CHUNK);
        BASE.store(base, Ordering::Relaxed);
        LEN.store(len, Ordering::Release);
        return true;
    }
    false
}

/// Under Miri: the region is a heap buffer of [`MIRI_CHUNKS`] chunks, aligned to a chunk
/// and zeroed as fresh pages are, reserved on first use and kept for the process.
#[cfg(all(miri, not(loom)))]
fn ensure_reserved() -> bool {
    if LEN.load(Ordering::Acquire) != 0 {
        return true;
    }
    let len = MIRI_CHUNKS << CHUNK_SHIFT;
    let Ok(layout) = std::alloc::Layout::from_size_align(len, CHUNK) else {
        return false;
    };
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return false;
    }
    BASE.store(p as usize, Ordering::Relaxed);
    LEN.store(len, Ordering::Release);
    true
}

/// Chunks of the region under Miri (small: Miri keeps every byte).
#[cfg(miri)]
const MIRI_CHUNKS: usize = 16;

/// Gives the pages of `[p, p + len)` back to the OS (`MADV_DONTNEED`): they read as
/// zero afterwards. Under Miri they are zeroed.
///
/// # Safety
/// `[p, p + len)` is whole pages of the region that the caller owns and no one reads
/// before writing them again.
pub(crate) unsafe fn discard(p: *mut u8, len: usize) {
    #[cfg(not(miri))]
    // SAFETY: the caller's contract; MADV_DONTNEED drops the pages.
    unsafe {
        libc::madvise(p.cast(), len, libc::MADV_DONTNEED);
    }
    #[cfg(miri)]
    // SAFETY: the caller's contract: the range is the caller's to write.
    unsafe {
        p.write_bytes(0, len)
    };
}

/// Carves `bytes` (rounded up to whole chunks) for `owner`; returns the base address.
/// The caller holds [`LOCK`].
#[cfg(not(loom))]
pub(crate) fn carve(bytes: u64, owner: *mut ()) -> Option<*mut u8> {
    if !ensure_reserved() {
        return None;
    }
    release_deferred();
    let total = LEN.load(Ordering::Acquire) >> CHUNK_SHIFT;
    let need = chunks_for(bytes);
    // SAFETY: the caller holds `LOCK`.
    let used = unsafe { &mut *USED.0.get() };
    let is_used = |used: &[u64], c: usize| used[c / 64] >> (c % 64) & 1 == 1;
    let mut run = 0;
    for c in 0..total {
        if is_used(used, c) {
            run = 0;
            continue;
        }
        run += 1;
        if run == need {
            let first = c + 1 - need;
            for k in first..=c {
                used[k / 64] |= 1 << (k % 64);
                DIRECTORY[k].store(owner, Ordering::Release);
            }
            return Some((BASE.load(Ordering::Relaxed) + (first << CHUNK_SHIFT)) as *mut u8);
        }
    }
    None
}

/// Points the directory entries of the `chunks` chunks at `base` (carved) to `owner`
/// (null: no owner). The caller holds [`LOCK`].
#[cfg(not(loom))]
pub(crate) fn assign(base: *mut u8, chunks: usize, owner: *mut ()) {
    let first = ((base as usize) - BASE.load(Ordering::Relaxed)) >> CHUNK_SHIFT;
    debug_assert!(first + chunks <= LEN.load(Ordering::Relaxed) >> CHUNK_SHIFT);
    for slot in &DIRECTORY[first..first + chunks] {
        slot.store(owner, Ordering::Release);
    }
}

/// Returns the `chunks` chunks at `base` (carved) to the OS and to the region. The
/// caller holds [`LOCK`].
#[cfg(not(loom))]
pub(crate) fn release(base: *mut u8, chunks: usize) {
    let first = ((base as usize) - BASE.load(Ordering::Relaxed)) >> CHUNK_SHIFT;
    let need = chunks;
    debug_assert!(first + need <= LEN.load(Ordering::Relaxed) >> CHUNK_SHIFT);
    // SAFETY: `base..base + need chunks` lies inside the region and belongs to the slab
    // being released, which no pass uses any more.
    unsafe { discard(base, need << CHUNK_SHIFT) };
    // SAFETY: the lock is held.
    let used = unsafe { &mut *USED.0.get() };
    for k in first..first + need {
        used[k / 64] &= !(1 << (k % 64));
        DIRECTORY[k].store(ptr::null_mut(), Ordering::Release);
    }
}

/// Runs given back by [`release_later`], not yet returned to the region.
#[cfg(not(loom))]
static DEFERRED: RunStack = RunStack::new();

/// Returns the `chunks` chunks at `base` (carved, owned by the caller, unused by anyone)
/// without taking [`LOCK`]: their pages go back to the OS now, apart from the first,
/// which holds the run's place on a lock-free stack; the next [`carve`] returns them to
/// the region. Meanwhile their directory entries keep their owner.
///
/// # Safety
/// `base..base + chunks` chunks was carved and is owned by the caller, who gives it up:
/// no one reads or writes it afterwards.
#[cfg(not(loom))]
pub(crate) unsafe fn release_later(base: *mut u8, chunks: usize) {
    debug_assert!(chunks > 0 && lookup(base).is_some());
    // SAFETY: the run is the caller's and given up: dropping the pages after the first
    // changes no one's data.
    unsafe { discard(base.add(PAGE), (chunks << CHUNK_SHIFT) - PAGE) };
    // SAFETY: the run's first page is the caller's, chunk-aligned (so aligned for a
    // `Run`), and from now on only the stack reaches it.
    unsafe { DEFERRED.push(base.cast(), chunks) };
}

/// Returns every run on the deferred stack to the region. The caller holds [`LOCK`].
#[cfg(not(loom))]
fn release_deferred() {
    for (run, chunks) in DEFERRED.take_all() {
        release(run.cast(), chunks);
    }
}

/// Gives the pages of `[start, end)` back to the OS: they read as zero afterwards. The
/// range is the caller's, and no one reads it before writing it again (a slab range no
/// live slot covers, a buffer's spare capacity). Returns the bytes returned (whole pages
/// inside the range).
pub(crate) fn return_pages(start: *mut u8, end: *mut u8) -> u64 {
    let first = (start as usize).next_multiple_of(PAGE);
    let last = (end as usize) / PAGE * PAGE;
    if last <= first {
        return 0;
    }
    #[cfg(not(loom))]
    // SAFETY: the caller owns `[start, end)` and no thread reads it before writing it
    // (whole pages inside the range only).
    unsafe {
        discard(first as *mut u8, last - first)
    };
    (last - first) as u64
}

/// Under loom: slabs from the heap, leaked (models are small).
#[cfg(loom)]
pub(crate) fn carve(bytes: u64, _owner: *mut ()) -> Option<*mut u8> {
    let layout = std::alloc::Layout::from_size_align(bytes.max(1) as usize, CHUNK).ok()?;
    // SAFETY: non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    (!p.is_null()).then_some(p)
}

/// Under loom: no directory.
#[cfg(loom)]
pub(crate) fn assign(_base: *mut u8, _chunks: usize, _owner: *mut ()) {}

/// Under loom: nothing to return.
#[cfg(loom)]
pub(crate) fn release(_base: *mut u8, _chunks: usize) {}

/// Under loom: nothing to return.
///
/// # Safety
/// As the non-loom version.
#[cfg(loom)]
pub(crate) unsafe fn release_later(_base: *mut u8, _chunks: usize) {}
