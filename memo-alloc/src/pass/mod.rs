//! Passes and their contexts.

pub(crate) mod context;
mod enter;
mod finish;
pub(crate) mod fork;
mod start;
mod state;

pub(crate) use enter::{abandon_running, enter_helper, enter_main, leave, park};
pub(crate) use finish::end;
pub(crate) use start::{create, start};
pub(crate) use state::{PassKind, PassState};
