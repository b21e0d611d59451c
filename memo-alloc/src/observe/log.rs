//! Each observed thread's state ([`ThreadObs`]): its log of a whole-program recording
//! (events in chunks, the raw frames of sampled call sites), its heap counting, and the
//! current scope. Made at the thread's first observed call, with the re-entrancy guard set
//! (its memory comes from the backend), and kept for the life of the process in a list the
//! writer walks: a thread's events outlive the thread.
//!
//! Only the thread appends to its log. The writer reads a log once the recording is
//! stopped and the thread is not inside an append (`appending`, a store-load handshake
//! with the writer's stop, both sequentially consistent).

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use crate::observe::counts::Counting;
use crate::observe::state;
use crate::support::fallible::try_box;

/// What an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum EvKind {
    /// `alloc` of `size` bytes at `addr`.
    Alloc,
    /// `alloc_zeroed`.
    AllocZeroed,
    /// A free of `addr`.
    Free,
    /// The old block `addr` of a realloc, freed (numbered before the backend moves it).
    ReallocFree,
    /// The new block `addr` of a realloc (numbered after).
    Realloc,
    /// Scope `scope` entered, under `site` (its parent), named by `addr`/`size` (a
    /// `&'static str`'s pointer and length), of kind `extra`.
    Enter,
    /// Scope `scope` left.
    Exit,
}

/// One event of a thread's log (48 bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ev {
    pub(crate) seq: u64,
    /// Nanoseconds of the monotonic clock.
    pub(crate) ns: u64,
    pub(crate) addr: usize,
    pub(crate) size: u64,
    /// The scope the event happened in (of `Enter`/`Exit`: the scope itself).
    pub(crate) scope: u32,
    /// Index of the call site's first frame in the thread's frames, or `NO_SITE` (of
    /// `Enter`: the parent scope).
    pub(crate) site: u32,
    pub(crate) kind: EvKind,
    /// Alignment, log2 (of `Enter`: the scope's kind).
    pub(crate) extra: u8,
}

/// No call site.
pub(crate) const NO_SITE: u32 = u32::MAX;
/// Events per chunk of a log.
pub(crate) const CHUNK_EVENTS: usize = 4096;

/// One observed thread (see the module documentation).
pub(crate) struct ThreadObs {
    /// The operating system's thread id.
    pub(crate) tid: u64,
    /// Its name (`pthread_getname_np`), NUL-padded.
    pub(crate) name: [u8; 16],
    next: *mut ThreadObs,
    /// Inside an append (see the module documentation).
    appending: AtomicBool,
    /// The log: events in chunks of [`CHUNK_EVENTS`].
    pub(crate) chunks: Vec<Vec<Ev>>,
    /// Raw frames of sampled call sites, each site ended by a 0.
    pub(crate) frames: Vec<usize>,
    /// Bytes left before the next sampled call site.
    pub(crate) sample_left: u64,
    /// Heap counting.
    pub(crate) counting: Counting,
}

/// The list of every thread ever observed (newest first).
static THREADS: AtomicPtr<ThreadObs> = AtomicPtr::new(ptr::null_mut());

thread_local! {
    /// This thread's state, once observed; never freed.
    static OBS: Cell<*mut ThreadObs> = const { Cell::new(ptr::null_mut()) };
    /// The innermost recorded scope this thread is in (0: the program).
    pub(crate) static SCOPE: Cell<u32> = const { Cell::new(0) };
}

/// This thread's state, made at its first use; `None` when memory ran out or the thread
/// is being torn down. Call with the re-entrancy guard set.
pub(crate) fn this_thread<'a>() -> Option<&'a mut ThreadObs> {
    let p = OBS.try_with(Cell::get).ok()?;
    if !p.is_null() {
        // SAFETY: made by this thread below, never freed; only this thread takes `&mut`
        // to it (the writer reads the log while no append runs, see the module docs).
        return Some(unsafe { &mut *p });
    }
    let obs = try_box(ThreadObs {
        // SAFETY: gettid has no preconditions.
        tid: unsafe { libc::gettid() } as u64,
        name: thread_name(),
        next: ptr::null_mut(),
        appending: AtomicBool::new(false),
        chunks: Vec::new(),
        frames: Vec::new(),
        sample_left: state::site_sample(),
        counting: Counting::default(),
    })?;
    let p = Box::into_raw(obs);
    OBS.try_with(|c| c.set(p)).ok()?;
    let mut head = THREADS.load(Ordering::Acquire);
    loop {
        // SAFETY: `p` is ours until published by the exchange below.
        unsafe { (*p).next = head };
        match THREADS.compare_exchange_weak(head, p, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(h) => head = h,
        }
    }
    // SAFETY: as above.
    Some(unsafe { &mut *p })
}

/// The calling thread's name, NUL-padded (empty if it has none).
fn thread_name() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: a 16-byte buffer for the calling thread's name (the kernel's limit).
    unsafe { libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), name.len()) };
    name
}

/// Every thread observed so far, oldest first.
pub(crate) fn threads() -> Vec<*mut ThreadObs> {
    let mut out = Vec::new();
    let mut p = THREADS.load(Ordering::Acquire);
    while !p.is_null() {
        out.push(p);
        // SAFETY: listed states are never freed; `next` is written before publication.
        p = unsafe { (*p).next };
    }
    out.reverse();
    out
}

impl ThreadObs {
    /// Appends `ev` to the log while a recording runs, numbered and timed now (its `seq`
    /// and `ns` are set here); `false` when it was not logged.
    pub(crate) fn append(&mut self, mut ev: Ev) -> bool {
        self.appending.store(true, Ordering::SeqCst);
        let logged = state::recording() && self.room() && {
            ev.seq = state::next_seq();
            ev.ns = state::now_ns();
            if let Some(c) = self.chunks.last_mut() {
                c.push(ev);
            }
            true
        };
        self.appending.store(false, Ordering::Release);
        if !logged {
            state::drop_event();
        }
        logged
    }

    /// Room for one more event: a new chunk when the last is full, within the cap.
    fn room(&mut self) -> bool {
        if self.chunks.last().is_some_and(|c| c.len() < c.capacity()) {
            return true;
        }
        let bytes = (CHUNK_EVENTS * std::mem::size_of::<Ev>()) as u64;
        if self.chunks.try_reserve(1).is_err() || !state::charge(bytes) {
            return false;
        }
        let mut chunk = Vec::new();
        if chunk.try_reserve_exact(CHUNK_EVENTS).is_err() {
            return false;
        }
        self.chunks.push(chunk);
        true
    }

    /// Waits until no append runs (the recording is stopped); `false` after `spins` tries.
    pub(crate) fn quiesce(&self, spins: u32) -> bool {
        for _ in 0..spins {
            if !self.appending.load(Ordering::SeqCst) {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// Empties the log (after it was written), keeping the counting.
    pub(crate) fn clear_log(&mut self) {
        self.chunks = Vec::new();
        self.frames = Vec::new();
        self.sample_left = state::site_sample();
    }

    /// The events of the log, in order.
    pub(crate) fn events(&self) -> impl Iterator<Item = &Ev> {
        self.chunks.iter().flatten()
    }

    /// The thread's name, if it has one.
    pub(crate) fn name(&self) -> Option<String> {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(16);
        (end > 0).then(|| String::from_utf8_lossy(&self.name[..end]).into_owned())
    }
}
