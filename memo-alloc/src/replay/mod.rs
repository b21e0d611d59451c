//! Replaying a pass from a slab.

mod hit;
pub(crate) mod skips;
pub(crate) mod slab;
pub(crate) mod state;

pub(crate) use hit::*;
