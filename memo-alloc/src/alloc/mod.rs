//! The allocator: [`MemoAlloc`] and its `GlobalAlloc` impl, which sends each request
//! down one of four paths after one thread-local read (`global.rs`): the slab of a
//! replayed pass, the recorder of a profiled one, the counted backend of a pass that runs
//! without a plan, or the backend outside passes. The allocator's own large buffers and
//! the large blocks of passes without a plan take a path of their own (`own.rs`).
//!
//! The top of the crate: it uses `pass` (the thread's context), `replay`, `profiling`
//! (through the context's recorder), `memory`, `stats` and `support`; nothing uses it but
//! the crate's face.

mod global;
mod own;
mod profiled;
#[cfg(all(test, not(loom)))]
mod tests;

pub use global::MemoAlloc;
