//! Command line: the benchmark (parent), `child` (one cell, internal), `list`, and the
//! service benchmark (`service`, with its internal `service-server`).

use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::alloc::Allocator;
use crate::harness::parent::{self, Group, Schedule};
use crate::harness::{child, CellSpec};
use crate::report::{self, heapmaps, ratio_plot::ratio_plot, table, Format};
use crate::runner::Workload;
use crate::service::command::{self, ServerArgs, ServiceArgs};
use crate::workloads::Spec;

/// memo-bench: pass latency of DNN-shaped workloads under glibc, jemalloc, jemalloc-tuned,
/// mimalloc, memomalloc over System and memomalloc over jemalloc.
#[derive(Parser, Debug)]
#[command(name = "memo-bench", version)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Small matrix (< 60 s): three workloads, every allocator, 1 and 2 threads.
    #[arg(long)]
    quick: bool,
    /// Workloads, comma-separated: `net[:bN][:sM][+noscope|+divergent|+helpers]` with net one of
    /// mobilenet_v1, mobilenet_v2, resnet50, inception_v3, bert, gpt2; or `trace:<file>`
    /// (a memo-alloc trace from MEMO_TRACE_DIR); or, built with `--features engine`,
    /// `candle:model[:bN][:sM]` with model one of mobilenetv4, resnet18, bert-mini (the
    /// candle engine's own model code on synthetic weights; `--compute` does not apply).
    #[arg(long, global = true, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Batch sizes applied to every built-in workload (cross product).
    #[arg(long, global = true, value_delimiter = ',')]
    batch: Vec<usize>,
    /// Input sizes (image side, BERT sequence length, GPT-2 cached tokens) applied to every
    /// built-in workload (cross product).
    #[arg(long, global = true, value_delimiter = ',')]
    size: Vec<usize>,
    /// Allocators, comma-separated (glibc, jemalloc, jemalloc-tuned, mimalloc, memo,
    /// memo-jemalloc, static, memo-slots; default: all but memo-slots).
    #[arg(long, value_delimiter = ',')]
    allocators: Vec<String>,
    /// Thread counts, comma-separated (default 1,2,4,8).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// Measured passes per thread at 1 and 2 threads (halved at 4, quartered at 8; at least 3).
    #[arg(long)]
    passes: Option<u64>,
    /// Warm-up passes per thread (not measured; memomalloc profiles the first). One more
    /// unmeasured pass follows once memo's plans are published, for every allocator.
    #[arg(long)]
    warmup: Option<u64>,
    /// Repetitions of each cell (allocator order reversed every other one).
    #[arg(long)]
    reps: Option<usize>,
    /// Compute per byte, comma-separated: 0 = one element per cache line (allocation-bound),
    /// 1 = every element once (memory-bound), k > 1 = k multiply-adds per element.
    #[arg(long, value_delimiter = ',')]
    compute: Vec<f64>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Report directory (JSON, table, SVG plots, heap maps).
    #[arg(long, default_value = "target/memo-report")]
    report_dir: PathBuf,
    /// Write no report directory.
    #[arg(long)]
    no_report: bool,
    /// Write the report without memo traces and heap maps (a real engine's pass of 100k+
    /// allocations makes a trace of hundreds of MB, once per profile).
    #[arg(long)]
    no_traces: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
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
    List,
    /// Benchmarks an HTTP inference service (tokio + axum, one async memo pass per
    /// request) under memo and jemalloc: throughput, p50/p99 latency, peak RSS.
    Service(ServiceArgs),
    /// Runs the service's server (internal: `service` starts it under each allocator).
    #[command(hide = true)]
    ServiceServer(ServerArgs),
}

/// The default matrix's workloads.
pub const DEFAULT_WORKLOADS: &[&str] = &[
    "mobilenet_v1:b1:s224",
    "mobilenet_v2:b1:s224",
    "mobilenet_v2:b4:s128",
    "resnet50:b1:s128",
    "resnet50:b1:s128+noscope",
    "resnet50:b1:s128+divergent",
    "inception_v3:b1:s160",
    "bert:b1:s128",
    "gpt2:b1:s256",
];

/// The default run's compute sweep: workload and compute scales (at 2 threads).
pub const SWEEP_WORKLOAD: &str = "resnet50:b1:s128";
/// Compute scales of the sweep (1 is in the main matrix).
pub const SWEEP_COMPUTE: [f64; 2] = [0.0, 8.0];

/// `--quick`'s workloads.
pub const QUICK_WORKLOADS: &[&str] = &["mobilenet_v2:b1:s128", "resnet50:b1:s96", "bert:b1:s64"];

fn workloads(args: &Args) -> Result<Vec<String>, String> {
    let base: Vec<String> = if !args.workloads.is_empty() {
        args.workloads.clone()
    } else if args.quick {
        QUICK_WORKLOADS.iter().map(|s| s.to_string()).collect()
    } else {
        DEFAULT_WORKLOADS.iter().map(|s| s.to_string()).collect()
    };
    let mut out = Vec::new();
    for w in base {
        match Spec::parse(&w)? {
            Spec::Net {
                net,
                batch,
                size,
                variant,
            } => {
                let batches = if args.batch.is_empty() {
                    vec![batch]
                } else {
                    args.batch.clone()
                };
                let sizes = if args.size.is_empty() {
                    vec![size]
                } else {
                    args.size.clone()
                };
                for &b in &batches {
                    for &s in &sizes {
                        let name = Spec::Net {
                            net,
                            batch: b,
                            size: s,
                            variant,
                        }
                        .name();
                        if !out.contains(&name) {
                            out.push(name);
                        }
                    }
                }
            }
            t @ Spec::Trace(_) => out.push(t.name()),
            Spec::Candle(c) => {
                let batches = if args.batch.is_empty() {
                    vec![c.batch]
                } else {
                    args.batch.clone()
                };
                let sizes = if args.size.is_empty() {
                    vec![c.size]
                } else {
                    args.size.clone()
                };
                for &batch in &batches {
                    for &size in &sizes {
                        let name =
                            Spec::Candle(crate::workloads::candle::CandleSpec { batch, size, ..c })
                                .name();
                        // Checks the size against the model's limits.
                        Spec::parse(&name)?;
                        if !out.contains(&name) {
                            out.push(name);
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn schedule(args: &Args) -> Result<Schedule, String> {
    let allocators = if args.allocators.is_empty() {
        Allocator::DEFAULT.to_vec()
    } else {
        args.allocators
            .iter()
            .map(|a| Allocator::parse(a).ok_or_else(|| format!("unknown allocator {a:?}")))
            .collect::<Result<_, _>>()?
    };
    let threads = if !args.threads.is_empty() {
        args.threads.clone()
    } else if args.quick {
        vec![1, 2]
    } else {
        vec![1, 2, 4, 8]
    };
    let passes = args.passes.unwrap_or(if args.quick { 12 } else { 20 });
    let warmup = args.warmup.unwrap_or(3).max(1);
    let computes = if args.compute.is_empty() {
        vec![1.0]
    } else {
        args.compute.clone()
    };
    let mut groups = Vec::new();
    // The default run adds a compute sweep on one workload at 2 threads: from
    // allocation-bound (0) to compute-bound (8).
    let sweep = !args.quick && args.workloads.is_empty() && args.compute.is_empty();
    for w in workloads(args)? {
        for &c in &computes {
            for &t in &threads {
                if t == 0 {
                    return Err("thread counts must be positive".into());
                }
                groups.push(Group {
                    workload: w.clone(),
                    threads: t,
                    compute: c,
                    warmup,
                    passes: (passes * 2 / t.max(2) as u64).max(3),
                });
            }
        }
    }
    if sweep {
        for c in SWEEP_COMPUTE {
            groups.push(Group {
                workload: SWEEP_WORKLOAD.to_string(),
                threads: 2,
                compute: c,
                warmup,
                passes,
            });
        }
    }
    Ok(Schedule {
        groups,
        allocators,
        reps: args.reps.unwrap_or(1).max(1),
        trace_dir: (!args.no_report && !args.no_traces).then(|| args.report_dir.join("traces")),
        progress: !args.no_progress,
    })
}

/// Entry point; returns the exit code.
pub fn main() -> i32 {
    let args = Args::parse();
    match &args.command {
        Some(Cmd::Child { spec }) => run_child(spec),
        Some(Cmd::List) => list(&args),
        Some(Cmd::Service(a)) => command::run(a),
        Some(Cmd::ServiceServer(a)) => command::run_server(a),
        None => match run_parent(&args) {
            Ok(ok) => {
                if ok {
                    0
                } else {
                    1
                }
            }
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

fn list(args: &Args) -> i32 {
    let ws = match workloads(args) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("memo-bench: {e}");
            return 2;
        }
    };
    println!(
        "{:<36} {:>6} {:>12} {:>12} {:>12}",
        "workload", "ops", "allocs/pass", "MB/pass", "peak MB"
    );
    for w in ws {
        let spec = match Spec::parse(&w) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("memo-bench: {e}");
                return 2;
            }
        };
        match Workload::build(&spec) {
            Ok(wl) => {
                let (n, b) = wl.allocation_profile();
                let (ops, peak) = wl.ops_and_peak();
                println!(
                    "{:<36} {:>6} {:>12} {:>12.1} {:>12.1}",
                    w,
                    ops,
                    n,
                    b as f64 / 1e6,
                    peak as f64 / 1e6
                );
            }
            Err(e) => eprintln!("{w}: {e}"),
        }
    }
    0
}

fn run_parent(args: &Args) -> Result<bool, String> {
    let t0 = Instant::now();
    let sched = schedule(args)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.format == Format::Table {
        let max_t = sched.groups.iter().map(|g| g.threads).max().unwrap_or(1);
        println!(
            "memo-bench: {} cells ({} points x {} allocators x {} repetitions) on {cpus} CPUs{}",
            sched.groups.len() * sched.allocators.len() * sched.reps,
            sched.groups.len(),
            sched.allocators.len(),
            sched.reps,
            if max_t > cpus {
                format!("; thread counts above {cpus} are oversubscribed")
            } else {
                String::new()
            }
        );
    }
    if let Some(d) = &sched.trace_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    let runs = parent::run(&sched)?;
    let mut rep = report::aggregate(&sched.groups, &sched.allocators, &runs);
    rep.wall_s = t0.elapsed().as_secs_f64();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?
        ),
        Format::Table => {
            print!("{}", table::render(&rep));
            println!();
            print!("{}", summary(&rep));
        }
    }
    if !args.no_report {
        write_report(&args.report_dir, &rep, sched.trace_dir.as_deref())?;
        if args.format == Format::Table {
            println!("report: {}", args.report_dir.display());
        }
    }
    if !rep.checksums_agree {
        eprintln!(
            "memo-bench: CHECKSUMS DISAGREE: {}",
            rep.checksum_mismatches.join("; ")
        );
    }
    if rep.jemalloc_tuned_verified == Some(false) {
        eprintln!("memo-bench: jemalloc-tuned did not get oversize_threshold 1 MiB");
    }
    Ok(rep.checksums_agree && rep.jemalloc_tuned_verified != Some(false))
}

/// The geometric mean of positive ratios.
fn geometric_mean(rs: &[f64]) -> f64 {
    (rs.iter().map(|r| r.ln()).sum::<f64>() / rs.len() as f64).exp()
}

/// Geometric-mean ratios per allocator, and the checks.
fn summary(rep: &report::Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let mut names: Vec<&str> = Vec::new();
    for c in &rep.cells {
        if !names.contains(&c.allocator.as_str()) {
            names.push(&c.allocator);
        }
    }
    let _ = writeln!(
        s,
        "geometric mean of p50 / memo's p50 (>1: memomalloc faster), by threads:"
    );
    let mut threads: Vec<usize> = rep.cells.iter().map(|c| c.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    for name in names {
        let _ = write!(s, "  {name:<14}");
        for &t in &threads {
            let rs: Vec<f64> = rep
                .cells
                .iter()
                .filter(|c| c.allocator == name && c.threads == t)
                .filter_map(|c| c.p50_vs_memo)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let _ = write!(s, "  x{t}: {:.2}", geometric_mean(&rs));
        }
        let _ = writeln!(s);
    }
    // memo against the limit: static's plan served unchecked (workloads that do not
    // repeat exactly, where static runs as glibc, left out).
    let repeats = |w: &str| Spec::parse(w).is_ok_and(|s| s.repeats_exactly());
    let limit: Vec<(usize, f64)> = rep
        .cells
        .iter()
        .filter(|c| c.allocator == "static" && repeats(&c.workload))
        .filter_map(|c| Some((c.threads, 1.0 / c.p50_vs_memo?)))
        .collect();
    if !limit.is_empty() {
        let _ = write!(
            s,
            "memo's p50 / static's p50 (1.00: memo at the limit of a planned allocator):"
        );
        for &t in &threads {
            let rs: Vec<f64> = limit.iter().filter(|l| l.0 == t).map(|l| l.1).collect();
            if !rs.is_empty() {
                let _ = write!(s, "  x{t}: {:.2}", geometric_mean(&rs));
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "checksums agree across allocators: {}; jemalloc-tuned oversize_threshold verified: {}; load average {:.1} on {} CPUs; {:.0} s",
        if rep.checksums_agree { "yes" } else { "NO" },
        match rep.jemalloc_tuned_verified {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "n/a",
        },
        rep.load_average.unwrap_or(0.0),
        rep.cpus,
        rep.wall_s
    );
    s
}

fn write_report(
    dir: &std::path::Path,
    rep: &report::Report,
    trace_dir: Option<&std::path::Path>,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?;
    let w = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{}: {e}", dir.display()))
    };
    w("report.json", &json)?;
    w("table.txt", &(table::render(rep) + "\n" + &summary(rep)))?;
    let mut workloads: Vec<(String, u64)> = Vec::new();
    for c in &rep.cells {
        let k = (c.workload.clone(), c.compute.to_bits());
        if !workloads.contains(&k) {
            workloads.push(k);
        }
    }
    for (wl, c) in workloads {
        let cells: Vec<&report::Cell> = rep
            .cells
            .iter()
            .filter(|x| x.workload == wl && x.compute.to_bits() == c && x.allocator != "memo")
            .collect();
        let compute = f64::from_bits(c);
        let title = if compute == 1.0 {
            wl.clone()
        } else {
            format!("{wl} c{compute}")
        };
        let name = format!("ratio-{}.svg", memo_alloc::files::file_stem(&title));
        w(&name, &ratio_plot(&title, &cells, rep.cpus))?;
    }
    if let Some(t) = trace_dir {
        heapmaps::render_all(t, dir);
    }
    Ok(())
}
