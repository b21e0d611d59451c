//! Compiled plans and their slab instances.

pub(crate) mod cells;
pub(crate) mod compile;
pub(crate) mod group_index;
pub(crate) mod instance;
pub(crate) mod pool;
