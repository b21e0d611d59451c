//! Command line: the benchmark (the parent, without a subcommand), `list`, the service
//! benchmark (`service`), and the internal `child` (one cell) and `service-server`.
//!
//! The benchmark's options belong to the benchmark alone: given with a subcommand they are
//! refused, as each subcommand takes only its own.

mod run;
mod selection;

use clap::{Parser, Subcommand};

use crate::harness::{child, CellSpec};
use crate::service::command::{self, ServerArgs, ServiceArgs};
pub use selection::{
    RunArgs, Selection, DEFAULT_WORKLOADS, QUICK_WORKLOADS, SWEEP_COMPUTE, SWEEP_WORKLOAD,
};

/// memo-bench: pass latency of DNN-shaped workloads under glibc, jemalloc, jemalloc-tuned,
/// mimalloc, memomalloc over System and memomalloc over jemalloc, and an inference
/// service's latency under memo, jemalloc and mimalloc (`service`).
#[derive(Parser, Debug)]
#[command(name = "memo-bench", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Runs one cell (internal: the parent starts it with MEMO_BENCH_ALLOCATOR set).
    #[command(hide = true)]
    Child {
        /// The cell, as JSON.
        spec: String,
    },
    /// Lists the workloads of the selection with allocations and bytes per pass.
    List(Selection),
    /// Benchmarks an HTTP inference service (tokio + axum, one async memo pass per
    /// request) under memo, jemalloc and mimalloc: throughput, p50/p99 latency, peak RSS.
    Service(ServiceArgs),
    /// Runs the service's server (internal: `service` starts it under each allocator).
    #[command(hide = true)]
    ServiceServer(ServerArgs),
}

/// Entry point; returns the exit code: 0 when the run succeeded, 1 when it ran and its
/// results failed a check (checksums disagree, a request failed), 2 when it could not run
/// (a usage error, a cell that could not start).
pub fn main() -> i32 {
    let args = Args::parse();
    match &args.command {
        Some(Cmd::Child { spec }) => run_child(spec),
        Some(Cmd::List(sel)) => run::list(sel),
        Some(Cmd::Service(a)) => command::run(a),
        Some(Cmd::ServiceServer(a)) => command::run_server(a),
        None => match run::run_parent(&args.run) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(e) => {
                eprintln!("memo-bench: {e}");
                2
            }
        },
    }
}

fn run_child(spec: &str) -> i32 {
    let spec: CellSpec = match serde_json::from_str(spec) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("memo-bench child: bad cell spec: {e}");
            return 2;
        }
    };
    match child::run_cell(&spec) {
        Ok(r) => {
            println!("{}", serde_json::to_string(&r).expect("serialisable"));
            0
        }
        Err(e) => {
            eprintln!("memo-bench child: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests;
