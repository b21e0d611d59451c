//! memo-bench: DNN-shaped allocation workloads and the multithreaded pass-latency
//! comparison of memomalloc against glibc, jemalloc (default and tuned) and mimalloc.
//!
//! `cargo run --release -p memo-bench` runs the default matrix; `--quick` a small one;
//! `--help` lists the flags. With `--features engine`, `candle:<model>` workloads run
//! models of the candle engine (see `candle`). Each (workload, allocator, threads) cell
//! runs in a child process of this binary whose global allocator is chosen by environment
//! (see [`alloc`]); the parent gathers the results, prints a table and writes
//! `target/memo-report/`.

mod alloc;
#[cfg(feature = "engine")]
mod candle;
mod cli;
mod engine;
mod harness;
mod pass_count;
mod report;
mod workloads;

#[global_allocator]
static GLOBAL: alloc::Dispatch = alloc::Dispatch;

fn main() {
    std::process::exit(cli::main());
}
