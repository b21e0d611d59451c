//! The `service` and `service-server` subcommands.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::bench::{self, Setup};
use super::report;
use super::server::{self, ServeOptions};
use crate::alloc::{self, Allocator};
use crate::report::Format;

/// `memo-bench service`: the inference service under memo, jemalloc and mimalloc.
#[derive(Args, Debug, Clone)]
pub struct ServiceArgs {
    /// Short run (a smoke test, about 10 s): 4 clients, buckets 16,32, 1 s warm-up and 2 s
    /// measured per cell, one repetition.
    #[arg(long)]
    pub quick: bool,
    /// Allocators of the server, comma-separated (default memo,jemalloc,mimalloc).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub allocators: Vec<Allocator>,
    /// Concurrent client counts, comma-separated (default 1,4,16).
    #[arg(long, value_delimiter = ',')]
    pub clients: Vec<usize>,
    /// Measured seconds per cell and repetition (default 10).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Unmeasured seconds at the start of each cell (default 2).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Repetitions of each cell, the allocators' order reversed every other one (default
    /// 3; the median is reported).
    #[arg(long)]
    pub reps: Option<usize>,
    /// tokio worker threads of the server.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Sequence-length buckets, comma-separated (default 32,64,128,256); requests draw
    /// their lengths from [largest / 8, largest].
    #[arg(long, value_delimiter = ',')]
    pub buckets: Vec<usize>,
    /// Model compute per byte (0: allocation-bound, 1: memory-bound, k > 1: k
    /// multiply-adds per element).
    #[arg(long, default_value_t = 0.0)]
    pub compute: f64,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Report directory (service.json, service.txt, service.svg).
    #[arg(long, default_value = "target/memo-report")]
    pub report_dir: PathBuf,
    /// Write no report files.
    #[arg(long)]
    pub no_report: bool,
}

/// `memo-bench service-server` (internal: the benchmark's server child).
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Address to listen on (port 0: any).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,
    /// tokio worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Sequence-length buckets.
    #[arg(long, value_delimiter = ',', default_value = "32,64,128,256")]
    pub buckets: Vec<usize>,
    /// Model compute per byte.
    #[arg(long, default_value_t = 0.0)]
    pub compute: f64,
}

/// Runs the benchmark: 0 when every request succeeded and the answers agree, 1 when not,
/// 2 when it could not run.
pub fn run(a: &ServiceArgs) -> i32 {
    let pick = |given: &[usize], quick: &[usize], full: &[usize]| {
        if !given.is_empty() {
            given.to_vec()
        } else if a.quick {
            quick.to_vec()
        } else {
            full.to_vec()
        }
    };
    let setup = Setup {
        allocators: if a.allocators.is_empty() {
            vec!["memo".into(), "jemalloc".into(), "mimalloc".into()]
        } else {
            a.allocators.iter().map(|a| a.name().to_string()).collect()
        },
        clients: pick(&a.clients, &[4], &[1, 4, 16]),
        workers: a.workers,
        buckets: pick(&a.buckets, &[16, 32], &[32, 64, 128, 256]),
        compute: a.compute,
        warmup_s: a.warmup.unwrap_or(if a.quick { 1.0 } else { 2.0 }),
        duration_s: a.duration.unwrap_or(if a.quick { 2.0 } else { 10.0 }),
        reps: a.reps.unwrap_or(if a.quick { 1 } else { 3 }),
    };
    let table = a.format == Format::Text;
    let r = match bench::run(&setup, |what| {
        if table {
            eprintln!("memo-bench service: {what}");
        }
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("memo-bench service: {e}");
            return 2;
        }
    };
    let json = serde_json::to_string_pretty(&r).expect("serialisable");
    match a.format {
        Format::Json => println!("{json}"),
        Format::Text => print!("{}", report::table(&r)),
    }
    if !a.no_report {
        let dir = &a.report_dir;
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join("service.json"), &json))
            .and_then(|()| std::fs::write(dir.join("service.txt"), report::table(&r)))
            .and_then(|()| std::fs::write(dir.join("service.svg"), report::plot(&r)));
        if let Err(e) = written {
            eprintln!("memo-bench service: {}: {e}", dir.display());
            return 2;
        }
        if table {
            println!("report: {}", dir.join("service.*").display());
        }
    }
    let errors: u64 = r.cells.iter().map(|c| c.errors).sum();
    if errors > 0 || !r.checksums_agree {
        for c in r.cells.iter().filter(|c| c.errors > 0) {
            eprintln!(
                "memo-bench service: {} x{}: {} failed requests, first: {}",
                c.allocator,
                c.clients,
                c.errors,
                c.first_error.as_deref().unwrap_or("?")
            );
        }
        if !r.checksums_agree {
            eprintln!("memo-bench service: ANSWERS DISAGREE across allocators or requests");
        }
        return 1;
    }
    0
}

/// Runs the server child until it is killed.
pub fn run_server(a: &ServerArgs) -> i32 {
    let opts = ServeOptions {
        addr: a.addr,
        workers: a.workers,
        buckets: a.buckets.clone(),
        compute: a.compute,
        memo: alloc::selected().is_memo(),
    };
    match server::serve(&opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("memo-bench service-server: {e}");
            2
        }
    }
}
