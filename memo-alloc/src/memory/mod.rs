//! Memory the slabs and the allocator's own buffers come from.

pub(crate) mod blocks;
pub(crate) mod geometry;
pub(crate) mod lane_classes;
pub(crate) mod own_blocks;
pub(crate) mod region;
pub(crate) mod run_stack;
