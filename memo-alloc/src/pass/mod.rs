//! Passes and their contexts: the pass as a whole, shared by its contexts and handles
//! (`state.rs`); one thread's context of it (`context.rs`); how a pass starts (`start.rs`:
//! profile, replay or backend), how threads enter and leave its contexts (`enter.rs`), and
//! how it ends (`finish.rs`); the nodes of its op scopes (`scopes.rs`), and how an
//! undecided pass finds its shape class (`classify.rs`); the setup at the first pass and
//! the locks across `fork` (`fork.rs`).
//!
//! It may use `plan`, `registry`, `replay`, `profiling`, `memory`, `stats`, `support` and
//! `config`.

pub(crate) mod classify;
pub(crate) mod context;
mod enter;
mod finish;
pub(crate) mod fork;
pub(crate) mod scopes;
mod start;
mod state;

pub(crate) use enter::{abandon_running, enter_helper, enter_main, leave, park};
pub(crate) use finish::end;
pub(crate) use start::{create, start};
pub(crate) use state::PassState;
