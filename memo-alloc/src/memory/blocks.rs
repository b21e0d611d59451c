//! Slab memory as blocks of whole chunks that move between slab instances, of any plan.
//!
//! A slab instance holds a block of the region while a pass uses it and while any slot
//! of it is live. An *unbound* pass (an async one, `Pass::wrap`) whose instance has no
//! live slot between two polls, or when it ends, gives the block back here ([`give_back`]);
//! the next instance that needs memory, of this plan or of another, takes the smallest
//! idle block that holds its plan, the one given back last among equals ([`take`]), else a
//! new one is carved. So the slab memory
//! of an async service follows what its polls use at once, not one plan's peak per request
//! in flight per plan. Passes bound to a thread (`pass()`) keep their instance's block
//! across passes: their pass boundaries take no lock. Those of a key whose passes come in
//! shape classes (a plan per class) give their slots' block back at each pass end and take
//! the one given back last ([`Fit::Recent`]): the classes take turns on one block, whose
//! pages are resident and cached from the pass before, instead of holding a block each.
//!
//! Every function here runs at a pass or poll boundary, under [`region::LOCK`]. At most
//! [`MAX_IDLE`] blocks wait idle; a block given back beyond that goes back to the OS.

use std::cell::UnsafeCell;

use crate::memory::geometry::{chunks_for, CHUNK, PAGE};
use crate::memory::region;
use crate::support::sync::plain::AtomicU32;
use crate::support::sync::Ordering;

/// Most idle blocks kept for reuse.
pub(crate) const MAX_IDLE: usize = 32;

/// A run of whole chunks of the slab region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) base: *mut u8,
    pub(crate) chunks: usize,
    /// Bytes from `base` its holders may have touched (the most any asked for since its
    /// pages were last returned): its pages past them are not resident.
    used: u64,
    /// Recent takes too large for it since it was last given back (see [`Fit::Recent`]).
    passed_over: u32,
}

impl Block {
    /// Bytes the block spans.
    pub(crate) fn bytes(&self) -> usize {
        self.chunks * CHUNK
    }
}

const NO_BLOCK: Block = Block {
    base: std::ptr::null_mut(),
    chunks: 0,
    used: 0,
    passed_over: 0,
};

/// Recent takes too large for an idle block that it waits through before it goes back to
/// the OS: a smaller class's block, which the classes taking turns on a larger one leave
/// idle, resident (a block that a thread keeps taking waits idle between its passes only).
const PASSED_OVER_LIMIT: u32 = 8;

/// The idle blocks; only touched with [`region::LOCK`] held.
struct Idle(UnsafeCell<([Block; MAX_IDLE], usize)>);

// SAFETY: only accessed with `region::LOCK` held (see `with_idle`).
unsafe impl Sync for Idle {}

static IDLE: Idle = Idle(UnsafeCell::new(([NO_BLOCK; MAX_IDLE], 0)));

/// Runs `f` on the idle list. The caller holds [`region::LOCK`].
fn with_idle<R>(f: impl FnOnce(&mut [Block; MAX_IDLE], &mut usize) -> R) -> R {
    // SAFETY: the caller holds the lock, so this is the only access.
    let (blocks, len) = unsafe { &mut *IDLE.0.get() };
    f(blocks, len)
}

/// Which idle blocks may serve a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The smallest that holds it (a slab's slots).
    Smallest,
    /// The one given back last, when it holds the request in at most twice the chunks it
    /// needs (the slots of a key's shape classes, which take turns on one block); else as
    /// `Smallest`. Idle blocks too small for [`PASSED_OVER_LIMIT`] such takes in a row go
    /// back to the OS.
    Recent,
    /// Only one of exactly the chunks it needs, its pages past the request returned to
    /// the OS (a lane block: a few pages used of one chunk, where an idle block's other
    /// resident pages would stay out of use).
    Exact,
}

/// Block takes that succeed before one fails as if the region were exhausted (`u32::MAX`:
/// none fails). Set by `testing::fail_block_takes_after`; read at each take (a pass
/// boundary, rarely).
pub(crate) static FAIL_AFTER: AtomicU32 = AtomicU32::new(u32::MAX);

/// Whether [`FAIL_AFTER`] makes this take fail (a take that succeeds counts it down).
fn injected_failure() -> bool {
    let step = |left: u32| (left != u32::MAX && left > 0).then(|| left - 1);
    FAIL_AFTER.fetch_update(Ordering::Relaxed, Ordering::Relaxed, step) == Err(0)
}

/// A block of at least `bytes` for `owner` (the directory points its chunks there): an
/// idle one that `fit` allows, else a new one. `None` when the region is exhausted.
pub(crate) fn take(bytes: u64, fit: Fit, owner: *mut ()) -> Option<Block> {
    let _g = region::LOCK.lock();
    take_locked(bytes, fit, owner)
}

/// As [`take`], with [`region::LOCK`] already held by the caller.
pub(crate) fn take_locked(bytes: u64, fit: Fit, owner: *mut ()) -> Option<Block> {
    if injected_failure() {
        return None;
    }
    let need = chunks_for(bytes);
    let reused = with_idle(|blocks, len| {
        if fit == Fit::Recent {
            release_passed_over(blocks, len, need);
        }
        let at = pick(&blocks[..*len], need, fit)?;
        let b = blocks[at];
        blocks.copy_within(at + 1..*len, at);
        *len -= 1;
        Some(b)
    });
    if let Some(mut b) = reused {
        region::assign(b.base, b.chunks, owner);
        if fit == Fit::Exact && b.used > bytes {
            // Nothing of the block is live: its holder gave it back.
            region::return_pages(
                b.base.wrapping_add(bytes as usize),
                b.base.wrapping_add(b.used as usize),
            );
            b.used = bytes;
        }
        b.used = b.used.max(bytes);
        return Some(b);
    }
    let base = region::carve(bytes, owner)?;
    Some(Block {
        base,
        chunks: need,
        used: bytes,
        passed_over: 0,
    })
}

/// A recent take of `need` chunks passes over the idle blocks smaller than that: each
/// counts it, and those that reach [`PASSED_OVER_LIMIT`] go back to the OS. The caller
/// holds [`region::LOCK`].
fn release_passed_over(blocks: &mut [Block; MAX_IDLE], len: &mut usize, need: usize) {
    let mut i = 0;
    while i < *len {
        let b = &mut blocks[i];
        if b.chunks < need {
            b.passed_over += 1;
            if b.passed_over >= PASSED_OVER_LIMIT {
                region::release(b.base, b.chunks);
                blocks.copy_within(i + 1..*len, i);
                *len -= 1;
                continue;
            }
        }
        i += 1;
    }
}

/// Which of the `idle` blocks (in the order given back) a take of `need` chunks uses, as
/// `fit` chooses: for `Recent`, the one given back last if it holds the request in at most
/// twice the chunks; else the smallest allowed, and of those the one given back last (its
/// pages are the likeliest to be resident and cached).
fn pick(idle: &[Block], need: usize, fit: Fit) -> Option<usize> {
    let allowed = |b: &Block| match fit {
        Fit::Smallest | Fit::Recent => b.chunks >= need,
        Fit::Exact => b.chunks == need,
    };
    let last = idle.len().checked_sub(1);
    if let Some(i) = last.filter(|&i| fit == Fit::Recent && allowed(&idle[i])) {
        if idle[i].chunks <= 2 * need {
            return Some(i);
        }
    }
    (0..idle.len())
        .rev()
        .filter(|&i| allowed(&idle[i]))
        .min_by_key(|&i| idle[i].chunks)
}

/// Takes `block` back from an instance none of whose slots is live: idle for the next
/// instance that needs memory, or (when [`MAX_IDLE`] wait already) returned to the OS.
pub(crate) fn give_back(block: Block) {
    let _g = region::LOCK.lock();
    give_back_locked(block);
}

/// As [`give_back`], with [`region::LOCK`] already held by the caller.
pub(crate) fn give_back_locked(mut block: Block) {
    debug_assert!(!block.base.is_null() && block.chunks > 0);
    block.passed_over = 0;
    region::assign(block.base, block.chunks, std::ptr::null_mut());
    let kept = with_idle(|blocks, len| {
        if *len == MAX_IDLE {
            return false;
        }
        blocks[*len] = block;
        *len += 1;
        true
    });
    if !kept {
        region::release(block.base, block.chunks);
    }
}

/// Returns `block` (no slot of it live, no instance holding it) to the OS and the region.
pub(crate) fn release(block: Block) {
    let _g = region::LOCK.lock();
    region::release(block.base, block.chunks);
}

/// Returns every idle block to the OS and the region (a test's starting point, so that
/// blocks other tests gave back do not decide which block a pass takes).
pub(crate) fn release_idle() {
    let _g = region::LOCK.lock();
    with_idle(|blocks, len| {
        for b in &blocks[..*len] {
            region::release(b.base, b.chunks);
        }
        *len = 0;
    });
}

/// Idle blocks and the bytes of their pages resident in memory (measured with `mincore`).
pub(crate) fn idle_resident() -> (u64, u64) {
    let _g = region::LOCK.lock();
    with_idle(|blocks, len| {
        let resident = blocks[..*len]
            .iter()
            .map(|b| resident_bytes(b.base, b.bytes()))
            .sum();
        (*len as u64, resident)
    })
}

/// Bytes of `[base, base + len)` (whole pages of the region) resident in memory.
pub(crate) fn resident_bytes(base: *mut u8, len: usize) -> u64 {
    // Neither loom's heap slabs nor Miri have page residency to measure.
    if cfg!(loom) || cfg!(miri) || base.is_null() {
        return 0;
    }
    let pages = len.div_ceil(PAGE).max(1);
    let mut vec: Vec<u8> = Vec::new();
    if vec.try_reserve_exact(pages).is_err() {
        return 0;
    }
    vec.resize(pages, 0);
    // SAFETY: `base..base + pages * PAGE` lies inside carved chunks of the region (a
    // block, or an instance's plan height rounded up to pages within its block); mincore
    // only reads page residency.
    let rc = unsafe { libc::mincore(base.cast(), pages * PAGE, vec.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * PAGE as u64
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn owner(n: usize) -> *mut () {
        n as *mut ()
    }

    /// Runs `f` with the region lock held and the idle list to itself (other tests of
    /// this binary give blocks back too): the list's blocks are set aside meanwhile, and
    /// those `f` leaves idle are released.
    fn alone(f: impl FnOnce()) {
        let _g = region::LOCK.lock();
        let saved = with_idle(|blocks, len| {
            let saved = (*blocks, *len);
            *len = 0;
            saved
        });
        f();
        with_idle(|blocks, len| {
            for b in &blocks[..*len] {
                region::release(b.base, b.chunks);
            }
            (*blocks, *len) = saved;
        });
    }

    #[test]
    fn a_block_given_back_serves_the_next_instance_that_fits_and_the_smallest_wins() {
        alone(|| {
            let big = take_locked(3 * CHUNK as u64, Fit::Smallest, owner(8)).expect("carved");
            let small = take_locked(CHUNK as u64, Fit::Smallest, owner(16)).expect("carved");
            assert_eq!((big.chunks, small.chunks), (3, 1));
            give_back_locked(big);
            give_back_locked(small);
            // One chunk: the small block, not the big one.
            let again = take_locked(100, Fit::Smallest, owner(24)).expect("reused");
            assert_eq!(again.base, small.base);
            assert_eq!(region::lookup(again.base), Some(owner(24)));
            // Two chunks: only the big block fits.
            let two = take_locked(2 * CHUNK as u64, Fit::Smallest, owner(32)).expect("reused");
            assert_eq!((two.base, two.chunks), (big.base, 3));
            assert_eq!(
                region::lookup(big.base.wrapping_add(2 * CHUNK)),
                Some(owner(32))
            );
            region::release(two.base, two.chunks);
            region::release(again.base, again.chunks);
            assert_eq!(region::lookup(big.base), Some(std::ptr::null_mut()));
        });
    }

    /// A key's shape classes take turns on one block: the one given back last serves a
    /// request it holds in at most twice the chunks, where the smallest fit would take an
    /// older, colder block; past twice, the smallest fit decides.
    #[test]
    fn a_recent_fit_takes_the_block_given_back_last() {
        alone(|| {
            let one = take_locked(CHUNK as u64, Fit::Smallest, owner(80)).expect("carved");
            let two = take_locked(2 * CHUNK as u64, Fit::Smallest, owner(88)).expect("carved");
            give_back_locked(one);
            give_back_locked(two);
            let again = take_locked(100, Fit::Recent, owner(96)).expect("reused");
            assert_eq!(again.base, two.base, "given back last, twice the chunks");
            give_back_locked(again);
            let smallest = take_locked(100, Fit::Smallest, owner(104)).expect("reused");
            assert_eq!(smallest.base, one.base);
            give_back_locked(smallest);
            // Given back last, a block of four chunks: past twice one chunk, within twice
            // two.
            let four = take_locked(4 * CHUNK as u64, Fit::Smallest, owner(112)).expect("carved");
            give_back_locked(four);
            let small = take_locked(CHUNK as u64, Fit::Recent, owner(120)).expect("reused");
            assert_eq!(small.base, one.base, "four chunks are past twice one");
            region::release(small.base, small.chunks);
            let taken = take_locked(2 * CHUNK as u64, Fit::Recent, owner(128)).expect("reused");
            assert_eq!(taken.base, four.base, "four chunks are within twice two");
            region::release(taken.base, taken.chunks);
        });
    }

    /// An idle block too small for recent fits goes back to the OS once
    /// `PASSED_OVER_LIMIT` of them passed it over: it is a smaller class's, which the
    /// classes taking turns on a larger block leave idle. Given back again, it counts
    /// afresh.
    #[test]
    fn a_recent_fit_releases_a_smaller_block_it_keeps_passing_over() {
        alone(|| {
            let one = take_locked(CHUNK as u64, Fit::Smallest, owner(136)).expect("carved");
            give_back_locked(one);
            let mut two = take_locked(2 * CHUNK as u64, Fit::Recent, owner(144)).expect("carved");
            for _ in 1..PASSED_OVER_LIMIT - 1 {
                give_back_locked(two);
                two = take_locked(2 * CHUNK as u64, Fit::Recent, owner(144)).expect("reused");
            }
            assert_eq!(with_idle(|_, len| *len), 1, "passed over seven times: idle");
            // Taken and given back: it counts afresh.
            let again = take_locked(CHUNK as u64, Fit::Smallest, owner(152)).expect("reused");
            assert_eq!(again.base, one.base);
            give_back_locked(again);
            for _ in 0..PASSED_OVER_LIMIT - 1 {
                give_back_locked(two);
                two = take_locked(2 * CHUNK as u64, Fit::Recent, owner(144)).expect("reused");
            }
            assert_eq!(with_idle(|_, len| *len), 1);
            give_back_locked(two);
            let last = take_locked(2 * CHUNK as u64, Fit::Recent, owner(144)).expect("reused");
            assert_eq!(with_idle(|_, len| *len), 0, "the eighth releases it");
            // A smallest fit never does.
            let small = take_locked(CHUNK as u64, Fit::Smallest, owner(160)).expect("carved");
            give_back_locked(small);
            for _ in 0..2 * PASSED_OVER_LIMIT {
                let big = take_locked(3 * CHUNK as u64, Fit::Smallest, owner(168)).expect("carved");
                region::release(big.base, big.chunks);
            }
            assert_eq!(with_idle(|_, len| *len), 1);
            region::release(last.base, last.chunks);
        });
    }

    /// A lane block takes an idle block of exactly its chunks: a larger one stays idle
    /// for a slab that needs it.
    #[test]
    fn an_exact_fit_passes_over_larger_idle_blocks() {
        alone(|| {
            let big = take_locked(2 * CHUNK as u64, Fit::Smallest, owner(40)).expect("carved");
            give_back_locked(big);
            let lane = take_locked(4096, Fit::Exact, owner(48)).expect("carved");
            assert_eq!((lane.chunks, lane.used), (1, 4096));
            assert_ne!(lane.base, big.base, "the two-chunk block is not taken");
            let slab = take_locked(2 * CHUNK as u64, Fit::Smallest, owner(56)).expect("reused");
            assert_eq!(slab.base, big.base);
            region::release(slab.base, slab.chunks);
            region::release(lane.base, lane.chunks);
        });
    }

    /// A block taken for a lane block returns the pages its last holder touched past the
    /// request: they would stay resident, out of use, while the lane block lives.
    #[test]
    #[cfg_attr(miri, ignore = "page residency reads as zero under Miri")]
    fn an_exact_fit_returns_the_pages_past_its_request() {
        const USED: usize = 64 << 10;
        alone(|| {
            let slab = take_locked(USED as u64, Fit::Smallest, owner(64)).expect("carved");
            // SAFETY: the block's first bytes are this test's, mapped read-write.
            unsafe { std::ptr::write_bytes(slab.base, 1, USED) };
            assert_eq!(resident_bytes(slab.base, USED), USED as u64);
            give_back_locked(slab);
            let lane = take_locked(4096, Fit::Exact, owner(72)).expect("reused");
            assert_eq!(lane.base, slab.base, "the one-chunk block given back");
            assert_eq!(
                resident_bytes(lane.base, USED),
                4096,
                "only the request's page stays"
            );
            region::release(lane.base, lane.chunks);
        });
    }
}
