//! The public surface besides the allocator itself: the guards (`guards.rs`: `pass`, `op`,
//! `observe`), passes that follow the work across threads and tasks (`carry.rs`:
//! `current`, `PassHandle`, `Pass`), shape buckets and prewarming (`buckets.rs`), and what
//! a program reads back (`report.rs`: `stats`, `report`, `keys`).
//!
//! It may use `pass`, `plan`, `registry`, `memory`, `stats`, `support` and `config`.

pub(crate) mod buckets;
pub(crate) mod carry;
pub(crate) mod guards;
pub(crate) mod report;
