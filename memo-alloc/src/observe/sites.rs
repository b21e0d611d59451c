//! Sampled call sites of a whole-program recording.
//!
//! With a sampling interval of `n` bytes (`MEMO_PROFILE_BACKTRACE`, default 512 KiB), each
//! thread counts down `n` bytes of allocations; the allocation that reaches zero has its
//! call site captured and the count starts again at `n`. So every allocation of `n` bytes
//! or more has its call site, and a call site that allocates a share `s` of a thread's
//! bytes is seen about `s * bytes / n` times; `n = 1` captures every allocation's, `0`
//! none. The cost is bounded by one stack walk per `n` bytes allocated (plus one per
//! allocation of `n` bytes or more). Frames are instruction pointers, walked with
//! `backtrace::trace_unsynchronized` (no lock) and resolved when the trace is written.

use crate::observe::log::{ThreadObs, NO_SITE};
use crate::observe::state;
use crate::profiling::profile::FRAMES;

/// Frames walked past the allocator's own before the `FRAMES` kept.
const SKIPPED: usize = 12;

/// The call site of an allocation of `size` bytes if it is sampled (its first frame's
/// index in the thread's frames), else `NO_SITE`.
pub(super) fn maybe_capture(obs: &mut ThreadObs, size: u64) -> u32 {
    let interval = state::site_sample();
    if interval == 0 {
        return NO_SITE;
    }
    if size < obs.sample_left {
        obs.sample_left -= size;
        return NO_SITE;
    }
    obs.sample_left = interval;
    capture(obs)
}

fn capture(obs: &mut ThreadObs) -> u32 {
    let room = FRAMES + SKIPPED + 1;
    if obs.frames.len() + room > obs.frames.capacity() {
        let more = obs.frames.capacity().max(room * 64);
        if !state::charge((more * std::mem::size_of::<usize>()) as u64)
            || obs.frames.try_reserve(more).is_err()
        {
            return NO_SITE;
        }
    }
    let start = obs.frames.len() as u32;
    let frames = &mut obs.frames;
    let mut n = 0;
    // SAFETY: `trace_unsynchronized` asks that no other thread unwinds through the
    // unwinder's state in a way that is not thread-safe; on Linux the unwinder (libgcc's
    // `_Unwind_Backtrace`) is thread-safe, which backtrace's synchronized `trace` relies on
    // too. Only the instruction pointers are read; room for them was reserved above, so
    // the walk allocates nothing.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            frames.push(frame.ip() as usize);
            n += 1;
            n < FRAMES + SKIPPED
        });
    }
    frames.push(0);
    start
}
