//! Heap counters a program (or a test) reads and asserts on: per tracker, per thread and
//! for the process ([`HeapStats`]).
//!
//! A block counts against the thread that allocated it, and against the trackers open on
//! that thread then. Each thread keeps a table of the blocks it counted; a free is matched
//! in the freeing thread's table only, so a block freed on another thread stays in its
//! thread's current bytes until its address is handed out again on that thread (then the
//! old block is known to be gone). Current and peak are thus upper bounds where blocks
//! cross threads; allocations and bytes allocated are exact. Slab allocations of replayed
//! passes count in allocations, bytes and the slab share, not in current and peak: their
//! memory is the slab's, planned and held apart from the heap.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::support::hash::FastMap;

/// Heap counters (**contract**): what a tracker, a thread or the process allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HeapStats {
    /// Allocations made: `alloc`, `alloc_zeroed` and `realloc` calls (a realloc is a new
    /// block that replaces its old one).
    pub allocations: u64,
    /// Bytes those calls asked for.
    pub bytes: u64,
    /// Frees matched to a counted block (a realloc's old block included).
    pub frees: u64,
    /// Blocks counted and not freed.
    pub current_blocks: u64,
    /// Their bytes.
    pub current_bytes: u64,
    /// The most bytes current at once.
    pub peak_bytes: u64,
    /// Blocks current when that peak was reached.
    pub peak_blocks: u64,
    /// Allocations served from the slab of a replayed pass.
    pub slab_allocations: u64,
    /// Their bytes.
    pub slab_bytes: u64,
}

impl HeapStats {
    /// The share of allocations served from slabs (0 without allocations).
    pub fn slab_share(&self) -> f64 {
        if self.allocations == 0 {
            0.0
        } else {
            self.slab_allocations as f64 / self.allocations as f64
        }
    }

    fn alloc(&mut self, size: u64, slab: bool) {
        self.allocations += 1;
        self.bytes += size;
        if slab {
            self.slab_allocations += 1;
            self.slab_bytes += size;
            return;
        }
        self.current_blocks += 1;
        self.current_bytes += size;
        if self.current_bytes > self.peak_bytes {
            self.peak_bytes = self.current_bytes;
            self.peak_blocks = self.current_blocks;
        }
    }

    fn free(&mut self, size: u64) {
        self.frees += 1;
        self.current_blocks = self.current_blocks.saturating_sub(1);
        self.current_bytes = self.current_bytes.saturating_sub(size);
    }
}

/// A tracker's counters, kept by its thread.
#[derive(Clone, Copy, Debug)]
struct Tracker {
    /// Serial of the first block it counts.
    start: u64,
    /// Still open.
    open: bool,
    stats: HeapStats,
}

/// One thread's counting: its table of counted blocks, its own counters, its trackers.
#[derive(Default)]
pub(crate) struct Counting {
    /// Address of each counted block: its size and serial.
    live: FastMap<usize, (u64, u64)>,
    /// Serial of the next counted block.
    serial: u64,
    thread: HeapStats,
    trackers: Vec<Tracker>,
}

/// The process's counters (every observed thread).
struct Process {
    allocations: AtomicU64,
    bytes: AtomicU64,
    frees: AtomicU64,
    current_blocks: AtomicU64,
    current_bytes: AtomicU64,
    peak_bytes: AtomicU64,
    peak_blocks: AtomicU64,
    slab_allocations: AtomicU64,
    slab_bytes: AtomicU64,
}

static PROCESS: Process = Process {
    allocations: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    frees: AtomicU64::new(0),
    current_blocks: AtomicU64::new(0),
    current_bytes: AtomicU64::new(0),
    peak_bytes: AtomicU64::new(0),
    peak_blocks: AtomicU64::new(0),
    slab_allocations: AtomicU64::new(0),
    slab_bytes: AtomicU64::new(0),
};

impl Process {
    fn alloc(&self, size: u64, slab: bool) {
        let r = Ordering::Relaxed;
        self.allocations.fetch_add(1, r);
        self.bytes.fetch_add(size, r);
        if slab {
            self.slab_allocations.fetch_add(1, r);
            self.slab_bytes.fetch_add(size, r);
            return;
        }
        let blocks = self.current_blocks.fetch_add(1, r) + 1;
        let bytes = self.current_bytes.fetch_add(size, r) + size;
        if self.peak_bytes.fetch_max(bytes, r) < bytes {
            self.peak_blocks.store(blocks, r);
        }
    }

    fn free(&self, size: u64) {
        let r = Ordering::Relaxed;
        self.frees.fetch_add(1, r);
        let _ = self
            .current_blocks
            .fetch_update(r, r, |v| Some(v.saturating_sub(1)));
        let _ = self
            .current_bytes
            .fetch_update(r, r, |v| Some(v.saturating_sub(size)));
    }

    fn stats(&self) -> HeapStats {
        let r = Ordering::Relaxed;
        HeapStats {
            allocations: self.allocations.load(r),
            bytes: self.bytes.load(r),
            frees: self.frees.load(r),
            current_blocks: self.current_blocks.load(r),
            current_bytes: self.current_bytes.load(r),
            peak_bytes: self.peak_bytes.load(r),
            peak_blocks: self.peak_blocks.load(r),
            slab_allocations: self.slab_allocations.load(r),
            slab_bytes: self.slab_bytes.load(r),
        }
    }
}

/// The process's counters: every block counted on any thread.
pub(crate) fn process() -> HeapStats {
    PROCESS.stats()
}

impl Counting {
    /// Counts a block of `size` bytes at `addr` (a slab block is counted, not tabled). An
    /// address already in the table was freed elsewhere: that block is freed first.
    pub(crate) fn alloc(&mut self, addr: usize, size: u64, slab: bool) {
        if !slab {
            if let Some(old) = self.live.remove(&addr) {
                self.forget(old); // freed elsewhere: gone before this block came
            }
        }
        let serial = self.serial;
        self.serial += 1;
        self.thread.alloc(size, slab);
        PROCESS.alloc(size, slab);
        for t in self.trackers.iter_mut().filter(|t| t.open) {
            t.stats.alloc(size, slab);
        }
        if slab || self.live.try_reserve(1).is_err() {
            return;
        }
        self.live.insert(addr, (size, serial));
    }

    /// Matches a free of `addr` with a block this thread counted; `false` if none.
    pub(crate) fn free(&mut self, addr: usize) -> bool {
        match self.live.remove(&addr) {
            Some(block) => {
                self.forget(block);
                true
            }
            None => false,
        }
    }

    /// Takes a freed block `(size, serial)` off the counters that counted it.
    fn forget(&mut self, (size, serial): (u64, u64)) {
        self.thread.free(size);
        PROCESS.free(size);
        for t in self.trackers.iter_mut() {
            if t.open && t.start <= serial {
                t.stats.free(size);
            }
        }
    }

    /// This thread's counters.
    pub(crate) fn thread(&self) -> HeapStats {
        self.thread
    }

    /// Opens a tracker; returns its index. `None` when memory ran out.
    pub(crate) fn open(&mut self) -> Option<usize> {
        while self.trackers.last().is_some_and(|t| !t.open) {
            self.trackers.pop();
        }
        self.trackers.try_reserve(1).ok()?;
        self.trackers.push(Tracker {
            start: self.serial,
            open: true,
            stats: HeapStats::default(),
        });
        Some(self.trackers.len() - 1)
    }

    /// Tracker `index`'s counters.
    pub(crate) fn tracker(&self, index: usize) -> HeapStats {
        self.trackers
            .get(index)
            .map_or_else(HeapStats::default, |t| t.stats)
    }

    /// Closes tracker `index` (guards may close in any order).
    pub(crate) fn close(&mut self, index: usize) {
        if let Some(t) = self.trackers.get_mut(index) {
            t.open = false;
        }
        while self.trackers.last().is_some_and(|t| !t.open) {
            self.trackers.pop();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn trackers_count_what_was_allocated_while_open() {
        let mut c = Counting::default();
        c.alloc(0x10, 100, false);
        let t = c.open().unwrap();
        c.alloc(0x20, 50, false);
        c.alloc(0x30, 8, true); // a slab block: counted, not current
        assert!(c.free(0x10)); // made before the tracker: not its free
        assert!(c.free(0x20));
        assert!(!c.free(0x99));
        let s = c.tracker(t);
        assert_eq!((s.allocations, s.bytes, s.frees), (2, 58, 1));
        assert_eq!((s.current_bytes, s.peak_bytes, s.peak_blocks), (0, 50, 1));
        assert_eq!((s.slab_allocations, s.slab_bytes), (1, 8));
        assert_eq!(s.slab_share(), 0.5);
        let th = c.thread();
        assert_eq!((th.allocations, th.frees, th.peak_bytes), (3, 2, 150));
        c.close(t);
        assert!(c.trackers.is_empty());
    }

    #[test]
    fn a_reused_address_frees_the_block_it_held() {
        let mut c = Counting::default();
        let t = c.open().unwrap();
        c.alloc(0x10, 100, false);
        c.alloc(0x10, 30, false); // freed on another thread, handed out again here
        let s = c.tracker(t);
        assert_eq!(
            (s.current_blocks, s.current_bytes, s.peak_bytes),
            (1, 30, 100)
        );
    }

    #[test]
    fn nested_trackers_and_out_of_order_closes() {
        let mut c = Counting::default();
        let outer = c.open().unwrap();
        c.alloc(0x10, 10, false);
        let inner = c.open().unwrap();
        c.alloc(0x20, 20, false);
        c.close(outer);
        assert!(c.free(0x20));
        assert_eq!(c.tracker(inner).frees, 1);
        c.close(inner);
        assert!(c.trackers.is_empty());
    }
}
