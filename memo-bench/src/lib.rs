//! memo-bench: DNN-shaped allocation workloads and the multithreaded pass-latency
//! comparison of memomalloc against glibc, jemalloc (default and tuned) and mimalloc, and
//! against `static`, an ahead-of-time arena that serves the pass's own plan unchecked
//! ([`arena`]): the limit of a planned allocator.
//!
//! `cargo run --release -p memo-bench` runs the default matrix; `--quick` a small one;
//! `--help` lists the flags. With `--features engine`, `candle:<model>` workloads run
//! models of the candle engine (see `candle`). Each (workload, allocator, threads) cell
//! runs in a child process of this binary whose global allocator is chosen by environment
//! (see [`alloc`]); the parent gathers the results, prints a table and writes
//! `target/memo-report/`.
//!
//! `memo-bench service` benchmarks an HTTP inference service ([`service`]) under memo
//! and jemalloc; `examples/inference_service.rs` runs that service on its own.
//!
//! The library holds everything; the binary (`main.rs`) installs the dispatching global
//! allocator and calls [`cli::main`].

pub mod alloc;
pub mod arena;
pub mod backend;
#[cfg(feature = "engine")]
pub mod candle;
pub mod cli;
pub mod engine;
pub mod harness;
pub mod pass_count;
pub mod report;
pub mod runner;
pub mod service;
pub mod stats;
pub mod workloads;
