//! One reserved virtual region for every slab: "is this a slab pointer?" is one
//! subtraction and one compare ([`lookup`]), and a 2 MiB chunk directory maps any slab pointer to its
//! instance in O(1).
//!
//! The region is mapped `PROT_READ | PROT_WRITE` with `MAP_NORESERVE`: nothing is
//! committed until touched. Chunks are carved for slab instances at pass boundaries (under
//! a spin lock, never on the allocation path) and returned with `madvise(MADV_DONTNEED)`.

use std::cell::UnsafeCell;
use std::ptr;

use crate::slab::Instance;
use crate::sync::{AtomicPtr, AtomicUsize, Ordering, SpinLock};

/// log2 of the chunk size (2 MiB).
pub(crate) const CHUNK_SHIFT: u32 = 21;
/// Chunk size.
pub(crate) const CHUNK: usize = 1 << CHUNK_SHIFT;
/// Chunks in the largest region (64 GiB).
const MAX_CHUNKS: usize = 1 << 15;

static BASE: AtomicUsize = AtomicUsize::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NULL_INSTANCE: AtomicPtr<Instance> = AtomicPtr::new(ptr::null_mut());
static DIRECTORY: [AtomicPtr<Instance>; MAX_CHUNKS] = [NULL_INSTANCE; MAX_CHUNKS];

struct ChunkMap {
    lock: SpinLock,
    used: UnsafeCell<[u64; MAX_CHUNKS / 64]>,
}

// SAFETY: `used` is only accessed while `lock` is held.
unsafe impl Sync for ChunkMap {}

static CHUNKS: ChunkMap = ChunkMap {
    lock: SpinLock::new(),
    used: UnsafeCell::new([0; MAX_CHUNKS / 64]),
};

/// For a slab pointer, `Some` of the instance owning it (null only for a pointer no live
/// slab owns); `None` for any other pointer. One region check and one directory load.
#[inline(always)]
pub(crate) fn lookup(p: *mut u8) -> Option<*mut Instance> {
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

/// Carves `bytes` (rounded up to whole chunks) for `owner`; returns the base address.
pub(crate) fn carve(bytes: u64, owner: *mut Instance) -> Option<*mut u8> {
    let _g = CHUNKS.lock.lock();
    if !ensure_reserved() {
        return None;
    }
    let total = LEN.load(Ordering::Acquire) >> CHUNK_SHIFT;
    let need = (bytes.max(1) as usize).div_ceil(CHUNK);
    // SAFETY: the lock is held.
    let used = unsafe { &mut *CHUNKS.used.get() };
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

/// Returns the chunks of a slab at `base` of `bytes` to the OS and to the region.
pub(crate) fn release(base: *mut u8, bytes: u64) {
    let _g = CHUNKS.lock.lock();
    let first = ((base as usize) - BASE.load(Ordering::Relaxed)) >> CHUNK_SHIFT;
    let need = (bytes.max(1) as usize).div_ceil(CHUNK);
    // SAFETY: `base..base + need chunks` lies inside the region and belongs to the slab
    // being released, which no pass uses any more; MADV_DONTNEED drops its pages.
    unsafe {
        libc::madvise(base.cast(), need << CHUNK_SHIFT, libc::MADV_DONTNEED);
    }
    // SAFETY: the lock is held.
    let used = unsafe { &mut *CHUNKS.used.get() };
    for k in first..first + need {
        used[k / 64] &= !(1 << (k % 64));
        DIRECTORY[k].store(ptr::null_mut(), Ordering::Release);
    }
}

/// Before `fork` (after the registry's locks: `reclaim` takes this one inside `RETIRED`).
pub(crate) fn before_fork() {
    CHUNKS.lock.lock_for_fork();
}

/// After `fork`, in the parent and in the child.
pub(crate) fn after_fork() {
    CHUNKS.lock.force_unlock();
}
