//! Replaying a pass from a slab.

mod hit;
pub(crate) mod skips;
pub(crate) mod slab;

pub(crate) use hit::*;
