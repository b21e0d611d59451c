//! The plan registry.

pub(crate) mod cache;
mod entry;
pub(crate) mod reclaim;

pub(crate) use entry::*;
