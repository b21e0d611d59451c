//! Passes and their contexts.

pub(crate) mod context;
pub(crate) mod fork;
pub(crate) mod lifecycle;
mod state;

pub(crate) use state::*;
