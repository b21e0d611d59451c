//! Planning profiles.

pub(crate) mod document;
pub(crate) mod job;
pub(crate) mod lane_sizing;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod offsets;
pub(crate) mod worker;
