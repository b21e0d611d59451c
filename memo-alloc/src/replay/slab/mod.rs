//! Compiled plans and their slab instances.

pub(crate) mod compile;
pub(crate) mod group_index;
pub(crate) mod lanes;
pub(crate) mod pool;
