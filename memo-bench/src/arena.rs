//! The `static` allocator: an ahead-of-time arena, the physical limit of a planned
//! allocator (as TFLite's and ONNX Runtime's arenas serve a model).
//!
//! Each bench thread records its first pass (sizes, alignments and lifetimes, in the order
//! of allocation; the backend serves meanwhile), plans it with memo-planner's portfolio, and
//! serves every later pass from one arena of its own: the `i`-th allocation of a pass gets
//! `base + offset[i]`, and freeing an arena pointer does nothing. No matching and no
//! overlap checks: only a request larger or more aligned than its slot (which would write
//! past it) goes to the backend, as do allocations outside passes and those the plan does
//! not hold (still live at the end of the recorded pass). The backend is memo's default
//! as memo-alloc runs it (`crate::backend::memo_backend_alloc`), so that memo / static
//! compares matching and checks alone. It is correct only for passes that repeat exactly,
//! so a divergent workload runs it as its backend alone ([`disable`]).
//!
//! A `realloc` inside a pass is an allocation, a copy and a free, in recording and serving
//! alike, so both see the same sequence. The allocator's own bookkeeping (recording,
//! planning) runs on the backend: the thread's mode is `BOOKKEEPING` meanwhile.

use std::alloc::Layout;
use std::cell::Cell;
use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use memo_planner::offsets::best;
use memo_planner::{Buffer, Problem};

use crate::backend::{memo_backend_alloc, memo_backend_dealloc, memo_backend_realloc};

const OFF: u8 = 0;
const RECORDING: u8 = 1;
const SERVING: u8 = 2;
const BOOKKEEPING: u8 = 3;

/// An offset meaning "not in the plan: the backend serves it".
const UNPLANNED: u64 = u64::MAX;

/// Address space reserved for every thread's arena (`MAP_NORESERVE`: nothing is committed
/// until touched).
const REGION_BYTES: usize = 64 << 30;

static REGION_BASE: AtomicUsize = AtomicUsize::new(0);
static REGION_USED: AtomicUsize = AtomicUsize::new(0);
static DISABLED: AtomicBool = AtomicBool::new(false);

/// One thread's state: its mode, the ordinal of its next allocation in the pass and its
/// arena (null before its first pass). Const-initialised, no destructor.
struct ThreadState {
    mode: Cell<u8>,
    next: Cell<u32>,
    arena: Cell<*mut Arena>,
}

thread_local! {
    static STATE: ThreadState = const {
        ThreadState {
            mode: Cell::new(OFF),
            next: Cell::new(0),
            arena: Cell::new(ptr::null_mut()),
        }
    };
}

/// A planned slot.
#[derive(Clone, Copy)]
struct Slot {
    offset: u64,
    size: u64,
    align: u64,
}

/// One allocation of the recorded pass.
struct Record {
    size: u64,
    align: u64,
    start: u64,
    /// `None` while live (still live at the pass's end: not planned).
    end: Option<u64>,
}

/// One thread's recording, then its plan and arena (leaked with the thread: bench threads
/// live as long as the process).
#[derive(Default)]
struct Arena {
    records: Vec<Record>,
    live: HashMap<usize, u32>,
    clock: u64,
    slots: Vec<Slot>,
    base: usize,
    planned: bool,
}

/// Serves no arena from now on (a divergent workload: its passes do not repeat).
pub fn disable() {
    DISABLED.store(true, Ordering::Relaxed);
}

/// Ends the arena pass when dropped.
pub struct ArenaPass(());

/// Starts a pass on this thread: the first is recorded, later ones served from the arena.
pub fn pass() -> ArenaPass {
    if !DISABLED.load(Ordering::Relaxed) {
        let _ = STATE.try_with(begin);
    }
    ArenaPass(())
}

impl Drop for ArenaPass {
    fn drop(&mut self) {
        let _ = STATE.try_with(end);
    }
}

fn begin(t: &ThreadState) {
    if t.mode.get() != OFF {
        return; // a pass inside a pass: one pass
    }
    let a = t.arena.get();
    if a.is_null() {
        t.mode.set(BOOKKEEPING);
        t.arena.set(Box::into_raw(Box::<Arena>::default()));
        t.mode.set(RECORDING);
        return;
    }
    // SAFETY: the thread's own arena, used only by this thread.
    if unsafe { (*a).planned } {
        t.next.set(0);
        t.mode.set(SERVING);
    }
}

fn end(t: &ThreadState) {
    match t.mode.get() {
        SERVING => t.mode.set(OFF),
        RECORDING => {
            t.mode.set(BOOKKEEPING);
            // SAFETY: the thread's own arena, used only by this thread.
            plan(unsafe { &mut *t.arena.get() });
            t.mode.set(OFF);
        }
        _ => {}
    }
}

/// Plans the recorded pass and carves the arena (with the mode set to bookkeeping).
fn plan(a: &mut Arena) {
    let mut buffers = Vec::new();
    let mut index = Vec::new(); // buffer -> record
    for (i, r) in a.records.iter().enumerate() {
        if let Some(end) = r.end {
            let mut b = Buffer::new(i.to_string(), r.start, end.max(r.start + 1), r.size.max(1));
            b.align = memo_alloc::trace::plan_align(r.align, r.size);
            buffers.push(b);
            index.push(i);
        }
    }
    let mut slots: Vec<Slot> = a
        .records
        .iter()
        .map(|r| Slot {
            offset: UNPLANNED,
            size: r.size,
            align: r.align,
        })
        .collect();
    if let Ok(problem) = Problem::new(buffers) {
        // The portfolio's heuristics and iterated greedy, as memo-alloc plans, without the
        // exact step: its search tables would add to the resident memory the cell reports.
        let options = best::BestOptions {
            exact_max_buffers: 0,
            ..best::BestOptions::default()
        };
        let plan = best::portfolio(&problem, &options);
        let height = plan.height(&problem);
        if let Some(base) = carve(height as usize) {
            for (b, &off) in plan.offsets.iter().enumerate() {
                slots[index[b]].offset = off;
            }
            a.base = base;
        }
    }
    a.slots = slots;
    a.records = Vec::new();
    a.live = HashMap::new();
    a.planned = true;
}

/// Carves `bytes` (rounded up to 2 MiB) of the shared region; `None` when exhausted.
fn carve(bytes: usize) -> Option<usize> {
    let base = region_base()?;
    let len = bytes.max(1).next_multiple_of(2 << 20);
    let at = REGION_USED.fetch_add(len, Ordering::Relaxed);
    (at + len <= REGION_BYTES).then_some(base + at)
}

/// The region's base (reserved at the first call; 0 if it cannot be).
fn region_base() -> Option<usize> {
    let b = REGION_BASE.load(Ordering::Acquire);
    if b != 0 {
        return Some(b);
    }
    // SAFETY: an anonymous private mapping at an address of the kernel's choice.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            REGION_BYTES + (2 << 20),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let aligned = (p as usize).next_multiple_of(2 << 20);
    match REGION_BASE.compare_exchange(0, aligned, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Some(aligned),
        Err(other) => {
            // Another thread reserved first: give ours back.
            // SAFETY: the mapping just made, unused.
            unsafe { libc::munmap(p, REGION_BYTES + (2 << 20)) };
            Some(other)
        }
    }
}

/// Whether `p` is an arena pointer.
#[inline]
fn in_region(p: *mut u8) -> bool {
    let base = REGION_BASE.load(Ordering::Relaxed);
    base != 0 && (p as usize).wrapping_sub(base) < REGION_BYTES
}

/// `GlobalAlloc::alloc` (`zeroed`: `alloc_zeroed`).
///
/// # Safety
/// As `GlobalAlloc::alloc`.
#[inline]
pub unsafe fn alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    let served = STATE
        .try_with(|t| match t.mode.get() {
            // SAFETY: forwarded.
            SERVING => unsafe { serve(t, layout, zeroed) },
            // SAFETY: forwarded.
            RECORDING => unsafe { record(t, layout, zeroed) },
            _ => ptr::null_mut(),
        })
        .unwrap_or(ptr::null_mut());
    if !served.is_null() {
        return served;
    }
    // SAFETY: forwarded.
    unsafe { memo_backend_alloc(layout, zeroed) }
}

/// The slot of the pass's next allocation, if the request fits it (null: the backend
/// serves).
///
/// # Safety
/// As `GlobalAlloc::alloc`, with `t` this thread's state in mode `SERVING`.
#[inline]
unsafe fn serve(t: &ThreadState, layout: Layout, zeroed: bool) -> *mut u8 {
    let i = t.next.get();
    t.next.set(i.wrapping_add(1));
    // SAFETY: the thread's own arena (planned before serving starts).
    let a = unsafe { &*t.arena.get() };
    let Some(s) = a.slots.get(i as usize) else {
        return ptr::null_mut();
    };
    if s.offset == UNPLANNED || layout.size() as u64 > s.size || layout.align() as u64 > s.align {
        return ptr::null_mut();
    }
    let p = (a.base + s.offset as usize) as *mut u8;
    if zeroed {
        // SAFETY: the slot holds at least `layout.size()` bytes of the arena.
        unsafe { p.write_bytes(0, layout.size()) };
    }
    p
}

/// The backend serves; the allocation is recorded.
///
/// # Safety
/// As `GlobalAlloc::alloc`, with `t` this thread's state in mode `RECORDING`.
unsafe fn record(t: &ThreadState, layout: Layout, zeroed: bool) -> *mut u8 {
    // SAFETY: forwarded.
    let p = unsafe { memo_backend_alloc(layout, zeroed) };
    if p.is_null() {
        return p;
    }
    t.mode.set(BOOKKEEPING);
    // SAFETY: the thread's own arena.
    let a = unsafe { &mut *t.arena.get() };
    let i = a.records.len() as u32;
    a.records.push(Record {
        size: layout.size() as u64,
        align: layout.align() as u64,
        start: a.clock,
        end: None,
    });
    a.live.insert(p as usize, i);
    a.clock += 1;
    t.mode.set(RECORDING);
    p
}

/// `GlobalAlloc::dealloc`.
///
/// # Safety
/// As `GlobalAlloc::dealloc`.
#[inline]
pub unsafe fn dealloc(p: *mut u8, layout: Layout) {
    if in_region(p) {
        return; // an arena slot: nothing to do
    }
    let _ = STATE.try_with(|t| {
        if t.mode.get() == RECORDING {
            t.mode.set(BOOKKEEPING);
            // SAFETY: the thread's own arena.
            let a = unsafe { &mut *t.arena.get() };
            if let Some(i) = a.live.remove(&(p as usize)) {
                a.records[i as usize].end = Some(a.clock);
                a.clock += 1;
            }
            t.mode.set(RECORDING);
        }
    });
    // SAFETY: not an arena pointer: the backend's.
    unsafe { memo_backend_dealloc(p, layout) }
}

/// `GlobalAlloc::realloc`: in a pass (and for arena pointers) an allocation, a copy and a
/// free.
///
/// # Safety
/// As `GlobalAlloc::realloc`.
pub unsafe fn realloc(p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let in_pass = STATE
        .try_with(|t| matches!(t.mode.get(), RECORDING | SERVING))
        .unwrap_or(false);
    if !in_pass && !in_region(p) {
        // SAFETY: forwarded; the backend's pointer.
        return unsafe { memo_backend_realloc(p, layout, new_size) };
    }
    let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
        return ptr::null_mut();
    };
    // SAFETY: forwarded.
    let q = unsafe { alloc(new_layout, false) };
    if !q.is_null() {
        // SAFETY: both blocks hold the copied bytes and do not overlap (`p` is live).
        unsafe {
            ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
            dealloc(p, layout);
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    /// One pass: `a` and `b` live together, `c` after `a` is freed; `grow` asks `c` for
    /// more than the recorded pass did.
    fn run_pass(grow: usize) -> [usize; 3] {
        let _p = pass();
        // SAFETY: each block is written within its size and freed once, with its layout.
        unsafe {
            let a = alloc(layout(1000), false);
            let b = alloc(layout(500), true);
            a.write_bytes(1, 1000);
            assert_eq!(*b.add(499), 0, "zeroed");
            dealloc(a, layout(1000));
            let c = alloc(layout(800 + grow), false);
            c.write_bytes(2, 800 + grow);
            b.write_bytes(3, 500);
            dealloc(b, layout(500));
            dealloc(c, layout(800 + grow));
            [a as usize, b as usize, c as usize]
        }
    }

    #[test]
    fn later_passes_are_served_by_the_recorded_pass_s_plan() {
        std::thread::spawn(|| {
            let recorded = run_pass(0);
            assert!(recorded.iter().all(|&p| !in_region(p as *mut u8)));
            let served = run_pass(0);
            assert!(
                served.iter().all(|&p| in_region(p as *mut u8)),
                "{served:x?}"
            );
            // b overlaps neither a nor c (they are live with it); the plan is fixed.
            let [a, b, c] = served;
            assert!(b + 500 <= a.min(c) || b >= (a + 1000).max(c + 800));
            assert_eq!(run_pass(0), served);
            // A request larger than its slot goes to the backend; the others keep their
            // slots.
            let grown = run_pass(64);
            assert_eq!(&grown[..2], &served[..2]);
            assert!(!in_region(grown[2] as *mut u8));
        })
        .join()
        .unwrap();
    }
}
