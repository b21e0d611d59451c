//! What a run measures: the workloads (`--workloads`, `--batch`, `--size`, `--quick`) and
//! the schedule of cells over allocators, threads and compute scales.

use std::path::PathBuf;

use crate::alloc::Allocator;
use crate::harness::parent::{Group, Schedule};
use crate::report::Format;
use crate::workloads::candle::CandleSpec;
use crate::workloads::decode::DecodeSpec;
use crate::workloads::lengths::LengthsSpec;
use crate::workloads::spec::DEFAULT_WARMUP;
use crate::workloads::Spec;

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

/// Repetitions of every cell unless `--reps` says otherwise.
pub const DEFAULT_REPS: usize = 3;

/// `--quick`'s workloads.
pub const QUICK_WORKLOADS: &[&str] = &["mobilenet_v2:b1:s128", "resnet50:b1:s96", "bert:b1:s64"];

/// The workloads of a run or of `list`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Selection {
    /// Small matrix: three workloads, every allocator, 1 and 2 threads (about 2 minutes at
    /// 3 repetitions).
    #[arg(long)]
    pub quick: bool,
    /// Workloads, comma-separated: `net[:bN][:sM][+noscope|+divergent|+helpers]` with net one of
    /// mobilenet_v1, mobilenet_v2, resnet50, inception_v3, bert, gpt2; or
    /// `decode:step|request[:bN][:sP][:nK]` (GPT-2-small decoding K steps after a P-token
    /// prompt, a position or a whole request per pass); or `trace:<file>` (a memo-alloc
    /// trace from MEMO_TRACE_DIR); or, built with `--features engine`,
    /// `candle:model[:bN][:sM]` with model one of mobilenetv4, resnet18, bert-mini,
    /// efficientnet-b0, llama2c (`llama2c[:bN][:sP][:nK][:step|:request]`: the candle
    /// engine's own model code on synthetic weights; `--compute` does not apply).
    #[arg(long, value_delimiter = ',', value_parser = Spec::parse_runnable)]
    pub workloads: Vec<Spec>,
    /// Batch sizes applied to every built-in workload (cross product).
    #[arg(long, value_delimiter = ',')]
    pub batch: Vec<usize>,
    /// Input sizes (image side, BERT sequence length, GPT-2 cached tokens, a decoding
    /// request's prompt) applied to every built-in workload (cross product).
    #[arg(long, value_delimiter = ',')]
    pub size: Vec<usize>,
}

/// The benchmark's own options (the run without a subcommand).
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Allocators, comma-separated (default: all but memo-slots).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub allocators: Vec<Allocator>,
    /// Thread counts, comma-separated (default 1,2,4,8).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Measured passes per thread at 1 and 2 threads (halved at 4, quartered at 8; at least 3).
    #[arg(long)]
    pub passes: Option<u64>,
    /// Warm-up passes per thread (not measured; memomalloc profiles the first). Default 3,
    /// or one cycle of the shapes of a workload whose passes differ by design: a whole
    /// request for a decoder run a step per pass, 16 passes for `lengths`. One more
    /// unmeasured pass follows once memo's plans are published, for every allocator.
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Repetitions of each cell (default 3; --quick 3). Each repetition runs every cell
    /// once, the allocators of a group back to back in an order shuffled from --seed;
    /// the intervals of the ratios resample the repetitions.
    #[arg(long)]
    pub reps: Option<usize>,
    /// Seed of the allocator orders and of the bootstrap's resamples.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Compute per byte, comma-separated: 0 = one element per cache line (allocation-bound),
    /// 1 = every element once (memory-bound), k > 1 = k multiply-adds per element.
    #[arg(long, value_delimiter = ',')]
    pub compute: Vec<f64>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Report directory (JSON, table, SVG plots, heap maps).
    #[arg(long, default_value = "target/memo-report")]
    pub report_dir: PathBuf,
    /// Write no report directory.
    #[arg(long)]
    pub no_report: bool,
    /// Write the report without memo traces and heap maps (a real engine's pass of 100k+
    /// allocations makes a trace of hundreds of MB, once per profile).
    #[arg(long)]
    pub no_traces: bool,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// `given` when not empty, else `default`.
fn or_default<T: Clone>(given: &[T], default: T) -> Vec<T> {
    if given.is_empty() {
        vec![default]
    } else {
        given.to_vec()
    }
}

/// The canonical names of the selected workloads: the given ones, or `--quick`'s, or the
/// default matrix's, each built-in and candle workload crossed with `--batch` and `--size`.
/// Errors when a crossed candle workload is beyond its model's limits.
pub fn workloads(sel: &Selection) -> Result<Vec<String>, String> {
    let base: Vec<Spec> = if !sel.workloads.is_empty() {
        sel.workloads.clone()
    } else {
        let names = if sel.quick {
            QUICK_WORKLOADS
        } else {
            DEFAULT_WORKLOADS
        };
        names
            .iter()
            .map(|s| Spec::parse(s))
            .collect::<Result<_, _>>()?
    };
    let mut out: Vec<String> = Vec::new();
    let mut add = |name: String| {
        if !out.contains(&name) {
            out.push(name);
        }
    };
    for spec in base {
        match spec {
            Spec::Net {
                net,
                batch,
                size,
                variant,
            } => {
                for &b in &or_default(&sel.batch, batch) {
                    for &s in &or_default(&sel.size, size) {
                        add(Spec::Net {
                            net,
                            batch: b,
                            size: s,
                            variant,
                        }
                        .name());
                    }
                }
            }
            Spec::Decode(d) => {
                for &batch in &or_default(&sel.batch, d.batch) {
                    for &prompt in &or_default(&sel.size, d.prompt) {
                        add(Spec::Decode(DecodeSpec { batch, prompt, ..d }).name());
                    }
                }
            }
            Spec::Lengths(_) => {
                for &batch in &or_default(&sel.batch, 1) {
                    add(Spec::Lengths(LengthsSpec { batch }).name());
                }
            }
            t @ Spec::Trace(_) => add(t.name()),
            Spec::Candle(c) => {
                for &batch in &or_default(&sel.batch, c.batch) {
                    for &size in &or_default(&sel.size, c.size) {
                        let name = Spec::Candle(CandleSpec { batch, size, ..c }).name();
                        // Checks the size against the model's limits.
                        Spec::parse(&name)?;
                        add(name);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Warm-up passes per thread of `workload`: `--warmup`, else the workload's default
/// ([`Spec::default_warmup`]); at least one.
fn warmup_of(args: &RunArgs, workload: &str) -> u64 {
    args.warmup
        .unwrap_or_else(|| Spec::parse(workload).map_or(DEFAULT_WARMUP, |s| s.default_warmup()))
        .max(1)
}

/// The cells of a run: every workload x compute scale x thread count, for every
/// allocator; the default run adds a compute sweep on one workload at 2 threads.
pub fn schedule(args: &RunArgs) -> Result<Schedule, String> {
    let sel = &args.selection;
    let allocators = if args.allocators.is_empty() {
        Allocator::defaults()
    } else {
        args.allocators.clone()
    };
    let threads = if !args.threads.is_empty() {
        args.threads.clone()
    } else if sel.quick {
        vec![1, 2]
    } else {
        vec![1, 2, 4, 8]
    };
    if threads.contains(&0) {
        return Err("thread counts must be positive".into());
    }
    let passes = args.passes.unwrap_or(if sel.quick { 12 } else { 20 });
    let mut groups = Vec::new();
    for w in workloads(sel)? {
        let warmup = warmup_of(args, &w);
        for &compute in &or_default(&args.compute, 1.0) {
            for &t in &threads {
                groups.push(Group {
                    workload: w.clone(),
                    threads: t,
                    compute,
                    warmup,
                    passes: (passes * 2 / t.max(2) as u64).max(3),
                });
            }
        }
    }
    // The default run's sweep goes from allocation-bound (0) to compute-bound (8).
    let sweep = !sel.quick && sel.workloads.is_empty() && args.compute.is_empty();
    if sweep {
        for compute in SWEEP_COMPUTE {
            groups.push(Group {
                workload: SWEEP_WORKLOAD.to_string(),
                threads: 2,
                compute,
                warmup: warmup_of(args, SWEEP_WORKLOAD),
                passes,
            });
        }
    }
    Ok(Schedule {
        groups,
        allocators,
        reps: args.reps.unwrap_or(DEFAULT_REPS).max(1),
        seed: args.seed,
        trace_dir: (!args.no_report && !args.no_traces).then(|| args.report_dir.join("traces")),
        progress: !args.no_progress,
    })
}
