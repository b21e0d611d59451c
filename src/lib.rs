//! memomalloc: a profiling global allocator for programs that repeat the same computation.
//!
//! This facade re-exports the workspace's libraries:
//! - [`planner`] ([`memo_planner`]): strategies, lower bounds, validation, formats, heap maps;
//! - [`alloc`] ([`memo_alloc`]): the `#[global_allocator]`;
//! - [`study`]: allocation-pattern studies of recorded traces (`memo stats`, and the DHAT,
//!   Perfetto and CSV exports of `memo export`).
//!
//! The `memo` binary (`cargo run --release --bin memo -- --help`) plans, compares and draws
//! allocation problems and recorded traces.

pub use memo_alloc as alloc;
pub use memo_planner as planner;

pub mod study;
