//! Whether a whole-program recording runs, and what every thread's log shares: the
//! event sequence, the clock, the memory cap, the call-site sampling interval.
//!
//! One recording at a time: `Idle -> Recording -> Writing -> Idle`. While a recording is
//! written, threads log nothing (their events are counted as dropped); once written, the
//! logs are emptied and another recording may begin.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

use crate::support::thread;

const IDLE: u8 = 0;
const RECORDING: u8 = 1;
const WRITING: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(IDLE);
/// The next event's sequence number: one total order of every thread's events that agrees
/// with what happened before what (a free's number is taken before the backend frees, an
/// allocation's after it allocates, so a reused address is freed before it is reused).
static SEQ: AtomicU64 = AtomicU64::new(0);
/// The monotonic clock at the recording's start.
static START_NS: AtomicU64 = AtomicU64::new(0);
/// Call sites: 0 none, else the sampling interval in bytes (see `sites.rs`).
static SITE_SAMPLE: AtomicU64 = AtomicU64::new(0);
/// The most bytes of event and frame buffers a recording holds.
static CAP_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_CAP_BYTES);
/// Bytes of event and frame buffers held now.
static USED_BYTES: AtomicU64 = AtomicU64::new(0);
/// The recording reached its cap: nothing more is logged.
static TRUNCATED: AtomicBool = AtomicBool::new(false);
/// Events not logged (past the cap, or while written).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The next scope instance's id (0 is the program).
static NEXT_SCOPE: AtomicU32 = AtomicU32::new(1);

/// The default cap on a recording's buffers: 512 MiB (about 11 million events).
pub(crate) const DEFAULT_CAP_BYTES: u64 = 512 << 20;
/// The default call-site sampling interval: 512 KiB.
pub(crate) const DEFAULT_SITE_SAMPLE: u64 = 512 << 10;

/// How a recording runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    /// Call sites: 0 none, 1 every allocation's, `n` sampled every `n` bytes per thread.
    pub(crate) site_sample: u64,
    /// The cap on its buffers, in bytes.
    pub(crate) cap_bytes: u64,
}

/// Whether a recording runs (and logs: not past its cap).
#[inline]
pub(crate) fn recording() -> bool {
    STATE.load(Ordering::Relaxed) == RECORDING && !TRUNCATED.load(Ordering::Relaxed)
}

/// Whether a recording runs, truncated or not.
pub(crate) fn active() -> bool {
    STATE.load(Ordering::SeqCst) == RECORDING
}

/// Whether no recording runs or is being written.
pub(crate) fn idle() -> bool {
    STATE.load(Ordering::SeqCst) == IDLE
}

/// Begins a recording; `false` if one runs (or is being written).
pub(crate) fn begin(options: Options) -> bool {
    if STATE
        .compare_exchange(IDLE, RECORDING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    SITE_SAMPLE.store(options.site_sample, Ordering::Relaxed);
    CAP_BYTES.store(options.cap_bytes, Ordering::Relaxed);
    TRUNCATED.store(false, Ordering::Relaxed);
    DROPPED.store(0, Ordering::Relaxed);
    START_NS.store(now_ns(), Ordering::SeqCst);
    thread::observe_all(true);
    thread::settle();
    true
}

/// Stops the recording for writing; `false` if none runs.
pub(crate) fn stop() -> bool {
    let stopped = STATE
        .compare_exchange(RECORDING, WRITING, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    if stopped {
        thread::observe_all(false);
        thread::settle();
    }
    stopped
}

/// Ends the writing: the logs are empty, another recording may begin.
pub(crate) fn finish_writing() {
    USED_BYTES.store(0, Ordering::Relaxed);
    STATE.store(IDLE, Ordering::SeqCst);
}

/// Ends a recording in a forked child (the parent writes its own; the child's logs are
/// copies of the parent's).
pub(crate) fn forget_in_child() {
    if STATE.swap(IDLE, Ordering::SeqCst) != IDLE {
        thread::observe_all(false);
    }
}

/// The sequence number of the next event.
#[inline]
pub(crate) fn next_seq() -> u64 {
    SEQ.fetch_add(1, Ordering::SeqCst)
}

/// The monotonic clock, in nanoseconds.
#[inline]
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The monotonic clock at the recording's start.
pub(crate) fn start_ns() -> u64 {
    START_NS.load(Ordering::Relaxed)
}

/// The call-site sampling interval (0: no call sites).
#[inline]
pub(crate) fn site_sample() -> u64 {
    SITE_SAMPLE.load(Ordering::Relaxed)
}

/// A new scope instance's id.
pub(crate) fn next_scope() -> u32 {
    NEXT_SCOPE.fetch_add(1, Ordering::Relaxed)
}

/// Charges `bytes` of new buffers to the recording; past the cap the recording is
/// truncated and the charge refused.
pub(crate) fn charge(bytes: u64) -> bool {
    let used = USED_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes;
    if used > CAP_BYTES.load(Ordering::Relaxed) {
        USED_BYTES.fetch_sub(bytes, Ordering::Relaxed);
        TRUNCATED.store(true, Ordering::Relaxed);
        return false;
    }
    true
}

/// Counts an event not logged.
pub(crate) fn drop_event() {
    DROPPED.fetch_add(1, Ordering::Relaxed);
}

/// What the writer reports about the recording: truncated, events dropped.
pub(crate) fn losses() -> (bool, u64) {
    (
        TRUNCATED.load(Ordering::Relaxed),
        DROPPED.load(Ordering::Relaxed),
    )
}
