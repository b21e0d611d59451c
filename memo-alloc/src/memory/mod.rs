//! Memory the slabs and the allocator's own buffers come from: one reserved virtual region
//! carved in 2 MiB chunks, whose directory tells a slab pointer's owner in one load
//! (`region.rs`; `run_stack.rs` holds the chunks given back without its lock); blocks of
//! chunks that move between the slab instances of any plan (`blocks.rs`); the
//! allocator's own large buffers and the large blocks of passes without a plan
//! (`own_blocks.rs`); and the arithmetic the other parts share: chunk and alignment
//! geometry (`geometry.rs`) and the size classes of lane cells (`lane_classes.rs`). The
//! backend's free memory goes back to the OS once a profile is planned (`release.rs`),
//! and the 2 MiB pages a model's weights fill at startup stay on huge pages through it
//! (`startup_pages.rs`, counted by the jemalloc backend).
//!
//! It may use `support` only.

pub(crate) mod blocks;
pub(crate) mod geometry;
pub(crate) mod lane_classes;
pub(crate) mod own_blocks;
pub(crate) mod region;
pub(crate) mod release;
pub(crate) mod run_stack;
#[cfg(feature = "jemalloc")]
pub(crate) mod startup_pages;
