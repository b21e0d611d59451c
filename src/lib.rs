//! memomalloc: a profiling global allocator for programs that repeat the same computation.
//!
//! This facade re-exports the workspace's libraries:
//! - [`planner`] ([`memo_planner`]): strategies, lower bounds, validation, formats, heap maps;
//! - [`alloc`] ([`memo_alloc`]): the `#[global_allocator]`;
//! - [`study`]: allocation-pattern studies of recorded traces (`memo stats`, the DHAT,
//!   Perfetto, CSV, folded-stack, flame graph and pprof exports of `memo export`, and the
//!   comparison of two traces of `memo diff`).
//!
//! The `memo` binary (`cargo run --release --bin memo -- --help`) plans, compares and draws
//! allocation problems and recorded traces (`plan`, `compare`, `heapmap`), and studies and
//! exports traces (`stats`, `export`) and compares two (`diff`). Its exit status is the
//! same for every output format: 0 on success, 1 when the command ran and its result is a
//! failure (an invalid plan, no plan at the capacity asked for), 2 for a usage error or a
//! file that cannot be used (an input that cannot be read or is malformed, an output that
//! cannot be written).

pub use memo_alloc as alloc;
pub use memo_planner as planner;

pub mod study;
