//! Replaying a pass from a slab.

mod anchor;
mod free;
mod hit;
mod matching;
pub(crate) mod replayer;
pub(crate) mod skips;
pub(crate) mod slab;
pub(crate) mod state;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use free::{capacity, free, lane_grow};
#[cfg(all(test, loom))]
pub(crate) use hit::claim;
pub(crate) use hit::{alloc, undo};
