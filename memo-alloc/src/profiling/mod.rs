//! Profiling a pass.

pub(crate) mod lane_count;
pub(crate) mod live_table;
pub(crate) mod profile;
pub(crate) mod recorder;
pub mod tag;
