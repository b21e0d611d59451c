//! The allocator: [`MemoAlloc`] and its `GlobalAlloc` impl (`global.rs`), which sends each
//! request down one of its paths after one thread-local read: the slab of a replayed
//! pass (`global.rs`, into `replay::hit`), the recorder of a profiled one or the counted
//! backend of a pass without a plan (`profiled.rs`), or the backend outside passes. The
//! slow side (`observed.rs`) takes profiled passes, a thread's first call, and observed
//! threads (a whole-program recording, heap counters), which take their pass's path and
//! are then observed. The allocator's own large buffers and the large blocks of passes
//! without a plan take a path of their own (`own.rs`). `jemalloc.rs` is the default
//! backend: jemalloc with its blocks of 2 MiB and more on advised huge pages.
//!
//! The top of the crate: it may use `pass` (the thread's context), `replay`, `observe`,
//! `memory`, `stats` and `support`; nothing uses it but the crate's face.

mod global;
#[cfg(feature = "jemalloc")]
mod jemalloc;
mod observed;
mod own;
mod profiled;
#[cfg(all(test, not(loom)))]
mod tests;

pub use global::MemoAlloc;
#[cfg(feature = "jemalloc")]
pub use jemalloc::Jemalloc;
