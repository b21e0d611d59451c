//! Replaying a pass from a slab.

mod anchor;
pub(crate) mod free;
pub(crate) mod hit;
mod matching;
pub(crate) mod replayer;
pub(crate) mod skips;
pub(crate) mod slab;
pub(crate) mod state;
#[cfg(all(test, not(loom)))]
mod tests;
