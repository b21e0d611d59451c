//! Helpers of the shadow checker (`tests/shadow.rs`): a counting test backend and a
//! tracker that checks every block handed out by a `MemoAlloc` against the invariants.
//!
//! - [`CountingBackend`]: `System` behind counters (and an optional failure injector), so a
//!   test can tell how many allocations the backend served and hence how many the slab did.
//! - [`Block`] and the `Tracker*` functions: every live block of every test in this binary is
//!   registered in one address-ordered map; a block that would overlap a registered one is a
//!   failure. Each block is filled with a pattern derived from a process-unique id, so a
//!   write by any other allocation through an overlap is found when the block is verified
//!   (before every free and realloc).

#![allow(dead_code)]

pub mod checked;

use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use memo_alloc::MemoAlloc;

/// [`checked::Checked`] with call counters; const-constructible, so usable as
/// `static A: MemoAlloc<CountingBackend> = MemoAlloc::new(CountingBackend::new())`.
pub struct CountingBackend {
    allocs: AtomicU64,
    zeroed: AtomicU64,
    reallocs: AtomicU64,
    deallocs: AtomicU64,
    /// The next this-many alloc-family calls fail (return null).
    fail: AtomicU64,
}

/// A snapshot of a [`CountingBackend`]'s counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub allocs: u64,
    pub zeroed: u64,
    pub reallocs: u64,
    pub deallocs: u64,
}

impl Counts {
    /// `alloc` plus `alloc_zeroed` calls.
    pub fn fresh(&self) -> u64 {
        self.allocs + self.zeroed
    }

    pub fn since(&self, before: &Counts) -> Counts {
        Counts {
            allocs: self.allocs - before.allocs,
            zeroed: self.zeroed - before.zeroed,
            reallocs: self.reallocs - before.reallocs,
            deallocs: self.deallocs - before.deallocs,
        }
    }
}

impl CountingBackend {
    pub const fn new() -> CountingBackend {
        CountingBackend {
            allocs: AtomicU64::new(0),
            zeroed: AtomicU64::new(0),
            reallocs: AtomicU64::new(0),
            deallocs: AtomicU64::new(0),
            fail: AtomicU64::new(0),
        }
    }

    pub fn counts(&self) -> Counts {
        let r = Ordering::SeqCst;
        Counts {
            allocs: self.allocs.load(r),
            zeroed: self.zeroed.load(r),
            reallocs: self.reallocs.load(r),
            deallocs: self.deallocs.load(r),
        }
    }

    /// Makes the next `n` calls of `alloc`, `alloc_zeroed` or `realloc` return null.
    pub fn fail_next(&self, n: u64) {
        self.fail.store(n, Ordering::SeqCst);
    }

    fn failing(&self) -> bool {
        self.fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl Default for CountingBackend {
    fn default() -> Self {
        CountingBackend::new()
    }
}

// SAFETY: forwards to `Checked`, or returns null (always allowed).
unsafe impl GlobalAlloc for CountingBackend {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocs.fetch_add(1, Ordering::SeqCst);
        if self.failing() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { checked::Checked.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.zeroed.fetch_add(1, Ordering::SeqCst);
        if self.failing() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { checked::Checked.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.deallocs.fetch_add(1, Ordering::SeqCst);
        // SAFETY: forwarded.
        unsafe { checked::Checked.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.reallocs.fetch_add(1, Ordering::SeqCst);
        if self.failing() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { checked::Checked.realloc(ptr, layout, new_size) }
    }
}

/// The allocator under test.
pub type Alloc = MemoAlloc<CountingBackend>;

/// Every live tracked block of the process: start -> (end, uid).
static LIVE: Mutex<BTreeMap<usize, (usize, u64)>> = Mutex::new(BTreeMap::new());
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

fn live() -> std::sync::MutexGuard<'static, BTreeMap<usize, (usize, u64)>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Number of tracked live blocks in the process.
pub fn live_blocks() -> usize {
    live().len()
}

/// One live allocation as the program sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub ptr: usize,
    pub size: usize,
    pub align: usize,
    /// Process-unique: keys the overlap-detecting part of the pattern.
    pub uid: u64,
    /// The program's name for the data (stable across runs of the same program).
    pub label: u64,
}

const K: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(K);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The mask word `j` of a block (unique per block), and its data word `j` (per label).
#[inline]
fn mask(uid: u64, j: u64) -> u64 {
    mix(uid) ^ j.wrapping_mul(K)
}

#[inline]
fn data(label: u64, j: u64) -> u64 {
    mix(label ^ 0x5555_5555_5555_5555).wrapping_add(j)
}

impl Block {
    fn layout(&self) -> Layout {
        Layout::from_size_align(self.size, self.align).expect("valid layout")
    }

    fn words(&self, len: usize) -> (usize, usize) {
        (len / 8, len % 8)
    }

    /// Writes the pattern over the whole block.
    pub fn fill(&self) {
        let (n, rem) = self.words(self.size);
        let m0 = mix(self.uid);
        let d0 = mix(self.label ^ 0x5555_5555_5555_5555);
        let p = self.ptr as *mut u8;
        for j in 0..n as u64 {
            let w = m0 ^ j.wrapping_mul(K) ^ d0.wrapping_add(j);
            // SAFETY: the block is live and owned by the caller; `8j + 8 <= size`.
            unsafe { p.add(8 * j as usize).cast::<u64>().write_unaligned(w) };
        }
        if rem > 0 {
            let j = n as u64;
            let bytes = (mask(self.uid, j) ^ data(self.label, j)).to_le_bytes();
            for (i, b) in bytes.iter().take(rem).enumerate() {
                // SAFETY: inside the block.
                unsafe { p.add(8 * n + i).write(*b) };
            }
        }
    }

    /// Checks the first `len` bytes hold this block's pattern; returns a digest of the data
    /// read back (a function of the label and `len` only, when intact).
    pub fn verify(&self, len: usize, what: &str) -> u64 {
        self.verify_as(self.ptr, len, what)
    }

    /// As [`Block::verify`], reading the pattern at `at` (e.g. after a move by realloc).
    pub fn verify_as(&self, at: usize, len: usize, what: &str) -> u64 {
        let (n, rem) = self.words(len);
        let m0 = mix(self.uid);
        let d0 = mix(self.label ^ 0x5555_5555_5555_5555);
        let p = at as *const u8;
        let mut bad = 0u64;
        let mut digest = 0u64;
        for j in 0..n as u64 {
            // SAFETY: the block is live; `8j + 8 <= len <= size`.
            let w = unsafe { p.add(8 * j as usize).cast::<u64>().read_unaligned() };
            let m = m0 ^ j.wrapping_mul(K);
            bad |= w ^ m ^ d0.wrapping_add(j);
            digest = digest.rotate_left(7) ^ (w ^ m);
        }
        if rem > 0 {
            let j = n as u64;
            let mb = mask(self.uid, j).to_le_bytes();
            let db = data(self.label, j).to_le_bytes();
            for i in 0..rem {
                // SAFETY: inside the block.
                let b = unsafe { p.add(8 * n + i).read() };
                bad |= (b ^ mb[i] ^ db[i]) as u64;
                digest = digest.rotate_left(7) ^ (b ^ mb[i]) as u64;
            }
        }
        if bad != 0 {
            self.report_corruption(at, len, what);
        }
        mix(digest ^ (len as u64).wrapping_mul(K) ^ self.label)
    }

    #[cold]
    fn report_corruption(&self, at: usize, len: usize, what: &str) -> ! {
        let mut first = None;
        for i in 0..len {
            let j = (i / 8) as u64;
            let expect = (mask(self.uid, j) ^ data(self.label, j)).to_le_bytes()[i % 8];
            // SAFETY: inside the block.
            let got = unsafe { (at as *const u8).add(i).read() };
            if got != expect {
                first = Some((i, got, expect));
                break;
            }
        }
        let (i, got, expect) = first.expect("a mismatching byte");
        let addr = at + i;
        let owner = live()
            .range(..=addr)
            .next_back()
            .filter(|(_, &(end, _))| addr < end)
            .map(|(&s, &(e, u))| format!("{s:#x}..{e:#x} uid {u}"));
        panic!(
            "{what}: block {self:?} (read at {at:#x}) corrupted at byte {i} ({addr:#x}): \
             {got:#04x}, expected {expect:#04x}; live block there now: {owner:?}"
        );
    }
}

/// Checks a pointer just returned for `layout` and registers `[p, p + size)`; panics if
/// it is null, misaligned or overlaps a registered block.
pub fn register(p: *mut u8, layout: Layout, label: u64, what: &str) -> Block {
    assert!(!p.is_null(), "{what}: null for {layout:?}");
    let addr = p as usize;
    assert_eq!(
        addr % layout.align(),
        0,
        "{what}: {addr:#x} is not aligned for {layout:?}"
    );
    let end = addr + layout.size();
    let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
    let mut map = live();
    if let Some((&s, &(e, u))) = map.range(..end).next_back() {
        assert!(
            e <= addr,
            "{what}: new block {addr:#x}..{end:#x} ({layout:?}) overlaps live block \
             {s:#x}..{e:#x} (uid {u})"
        );
    }
    map.insert(addr, (end, uid));
    drop(map);
    Block {
        ptr: addr,
        size: layout.size(),
        align: layout.align(),
        uid,
        label,
    }
}

/// Removes `b` from the registry (it is about to be freed or moved).
pub fn unregister(b: &Block) {
    let removed = live().remove(&b.ptr);
    assert_eq!(
        removed.map(|(_, u)| u),
        Some(b.uid),
        "block {b:?} was not registered"
    );
}

/// Allocates through `a`, checks and fills the block.
pub fn alloc(a: &Alloc, size: usize, align: usize, zeroed: bool, label: u64) -> Block {
    let layout = Layout::from_size_align(size, align).expect("valid layout");
    // SAFETY: non-zero size.
    let p = unsafe {
        if zeroed {
            a.alloc_zeroed(layout)
        } else {
            a.alloc(layout)
        }
    };
    let what = if zeroed { "alloc_zeroed" } else { "alloc" };
    let b = register(p, layout, label, what);
    if zeroed {
        check_zeroed(p, size);
    }
    b.fill();
    b
}

/// Panics unless `[p, p + size)` is all zero.
pub fn check_zeroed(p: *mut u8, size: usize) {
    // SAFETY: a live block of `size` bytes.
    let s = unsafe { std::slice::from_raw_parts(p, size) };
    if let Some(i) = s.iter().position(|&b| b != 0) {
        panic!(
            "alloc_zeroed: byte {i} of {p:?} ({size} bytes) is {:#04x}",
            s[i]
        );
    }
}

/// Verifies and frees `b` through `a`; returns the digest of its data.
pub fn free(a: &Alloc, b: Block) -> u64 {
    let d = b.verify(b.size, "free");
    unregister(&b);
    // SAFETY: `b` is live, allocated by `a` with this layout.
    unsafe { a.dealloc(b.ptr as *mut u8, b.layout()) };
    d
}

/// The second half of a free handed to another thread: `b` was verified and unregistered by
/// its owner; verify again here (nothing may have written it since) and free.
pub fn free_unregistered(a: &Alloc, b: &Block) {
    b.verify(b.size, "free on another thread");
    // SAFETY: `b` is live, allocated by `a` with this layout, and owned by this thread now.
    unsafe { a.dealloc(b.ptr as *mut u8, b.layout()) };
}

/// Reallocs `b` to `new_size` through `a`: verifies the old block, checks the new one keeps
/// the old prefix, then refills it under a new uid. Returns the new block and the digest of
/// the old data.
pub fn realloc(a: &Alloc, b: Block, new_size: usize) -> (Block, u64) {
    let d = b.verify(b.size, "realloc (before)");
    unregister(&b);
    // SAFETY: `b` is live with this layout; `new_size` is non-zero.
    let p = unsafe { a.realloc(b.ptr as *mut u8, b.layout(), new_size) };
    let layout = Layout::from_size_align(new_size, b.align).expect("valid layout");
    let nb = register(p, layout, b.label, "realloc");
    b.verify_as(nb.ptr, b.size.min(new_size), "realloc kept contents");
    nb.fill();
    (nb, d)
}
