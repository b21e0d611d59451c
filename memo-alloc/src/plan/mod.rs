//! Planning, off the request's thread: the planner thread and its queue (`worker.rs`); a
//! planning job, from a finished profile to a published plan (`job.rs`); building a plan
//! document from a profile (`document.rs`, its lanes sized by `lane_sizing.rs`, its
//! offsets placed within the allocator's budget by `offsets.rs`); merging a re-profile
//! with the key's previous plan (`merge.rs`); and plans loaded from files (`load.rs`).
//!
//! It may use `registry`, `replay`, `profiling`, `format`, `memory`, `stats`, `support`
//! and `config`.

pub(crate) mod document;
pub(crate) mod job;
pub(crate) mod lane_sizing;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod offsets;
pub(crate) mod worker;
