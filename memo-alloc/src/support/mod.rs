//! Plumbing the rest of the crate uses, and which uses nothing of it: atomics, owner-only
//! cells and the spin lock (`sync.rs`, switched to loom's under `cfg(loom)`), the
//! per-thread state of the allocation path with the re-entrancy guard of the allocator's
//! own work (`thread.rs`), allocation that reports failure (`fallible.rs`), a fast
//! hasher (`hash.rs`), and a software prefetch (`prefetch.rs`).

pub(crate) mod fallible;
pub(crate) mod hash;
pub(crate) mod prefetch;
pub(crate) mod sync;
pub(crate) mod thread;
