//! A checking allocator over `System`: the shadow checker's global allocator and the base
//! of its test backends, so that memo-alloc's own bookkeeping (which goes to the global
//! allocator) is checked as well as the blocks its backend serves.
//!
//! Every block gets a header (a magic word, its size and alignment) and a trailing canary.
//! A free checks both (an overflow, a free of a foreign pointer, a double free or a free
//! with the wrong layout is found there), poisons the block and puts it in a quarantine;
//! when it leaves the quarantine its poison is checked (a write after free is found
//! there) before `System` gets it back. A violation aborts the process with a message: an
//! allocator may not unwind.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;

const LIVE: u64 = 0x4C49_5645_B10C_B10C;
const FREED: u64 = 0xF4EE_DF4E_EDF4_EED0;
const CANARY: u8 = 0xCA;
const POISON: u8 = 0xDF;
const TRAILER: usize = 16;
/// Freed blocks held back before `System` may reuse them.
const QUARANTINE: usize = 512;

/// The checking allocator.
pub struct Checked;

struct Quarantine {
    blocks: [(usize, usize, usize); QUARANTINE],
    next: usize,
}

static HELD: Mutex<Quarantine> = Mutex::new(Quarantine {
    blocks: [(0, 0, 0); QUARANTINE],
    next: 0,
});

fn die(what: &str, p: usize) -> ! {
    // No allocation: a fixed message through the raw write(2).
    let msg = format!("shadow checker: {what} at {p:#x}\n");
    // SAFETY: writing a valid buffer to stderr.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    std::process::abort()
}

/// The header size for `align`: room for the two header words, keeping the user pointer
/// aligned.
fn header(align: usize) -> usize {
    align.max(16)
}

fn outer(layout: Layout) -> Option<Layout> {
    let h = header(layout.align());
    Layout::from_size_align(layout.size().checked_add(h + TRAILER)?, h).ok()
}

/// # Safety
/// `base` is a fresh `System` block of `outer(layout)`.
unsafe fn arm(base: *mut u8, layout: Layout) -> *mut u8 {
    let h = header(layout.align());
    // SAFETY: inside the block: the header's last 16 bytes, then the trailer.
    unsafe {
        let user = base.add(h);
        user.cast::<u64>().sub(2).write(LIVE);
        user.cast::<u64>().sub(1).write(layout.size() as u64);
        user.add(layout.size()).write_bytes(CANARY, TRAILER);
        user
    }
}

/// Checks a block being freed: its header and its trailer.
///
/// # Safety
/// `user` was returned by this allocator (or the check fails first).
unsafe fn check(user: *mut u8, layout: Layout) {
    let p = user as usize;
    // SAFETY: the header precedes every block this allocator hands out.
    let (magic, size) = unsafe {
        (
            user.cast::<u64>().sub(2).read(),
            user.cast::<u64>().sub(1).read(),
        )
    };
    match magic {
        LIVE => {}
        FREED => die("double free", p),
        _ => die(
            "free of a pointer this allocator did not hand out (or a header overwritten)",
            p,
        ),
    }
    if size != layout.size() as u64 {
        die("free with a size other than the allocation's", p);
    }
    // SAFETY: the trailer follows the block.
    let trailer = unsafe { std::slice::from_raw_parts(user.add(layout.size()), TRAILER) };
    if trailer.iter().any(|&b| b != CANARY) {
        die("write past the end of a block", p);
    }
}

// SAFETY: every block is a `System` block of a larger layout with the user pointer inside
// it, aligned as requested and followed by `size` usable bytes.
unsafe impl GlobalAlloc for Checked {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(o) = outer(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: non-zero size.
        let base = unsafe { System.alloc(o) };
        if base.is_null() {
            return base;
        }
        // SAFETY: a fresh block of `o`.
        unsafe { arm(base, layout) }
    }

    unsafe fn dealloc(&self, user: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { check(user, layout) };
        // SAFETY: the header and the block are ours until released.
        unsafe {
            user.cast::<u64>().sub(2).write(FREED);
            user.write_bytes(POISON, layout.size());
        }
        let evicted = {
            let mut q = HELD.lock().unwrap_or_else(|e| e.into_inner());
            let i = q.next;
            q.next = (i + 1) % QUARANTINE;
            std::mem::replace(
                &mut q.blocks[i],
                (user as usize, layout.size(), layout.align()),
            )
        };
        // SAFETY: `evicted` was quarantined by this function.
        unsafe { release(evicted) };
    }
}

/// Checks a block leaving the quarantine, then gives it back to `System`.
///
/// # Safety
/// `(user, size, align)` was put in the quarantine by `dealloc` (or is all zero).
unsafe fn release((user, size, align): (usize, usize, usize)) {
    if user == 0 {
        return;
    }
    let p = user as *mut u8;
    // SAFETY: the block is quarantined: still allocated from `System`.
    let body = unsafe { std::slice::from_raw_parts(p, size) };
    if body.iter().any(|&b| b != POISON) {
        die("write after free", user);
    }
    let layout = Layout::from_size_align(size, align).expect("a layout handed out before");
    // SAFETY: as above; `outer` of a layout that was valid is valid.
    unsafe { System.dealloc(p.sub(header(align)), outer(layout).expect("valid")) };
}
