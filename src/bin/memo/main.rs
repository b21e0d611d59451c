//! `memo`: plan, compare and draw allocation problems and recorded traces.
//!
//! ```text
//! memo plan    INPUT [--strategy NAME] [--shared] [--capacity N] [--time-limit SECS]
//!              [--format text|json|csv] [-o OUT]
//! memo compare INPUT [--format text|json] [-o OUT]
//! memo heapmap INPUT [--strategy NAME] [--shared] -o OUT.svg
//! memo stats   TRACE [--format text|json] [-o OUT]
//! memo export  TRACE [--dhat OUT.json] [--perfetto OUT.json] [--csv OUT.csv]
//! ```
//!
//! INPUT is a CSV problem (minimalloc convention), a JSON problem, or a trace written by
//! memo-alloc (`MEMO_TRACE_DIR`).

mod compare_cmd;
mod export_cmd;
mod heapmap_cmd;
mod input;
mod output;
mod plan_cmd;
mod planning;
mod stats_cmd;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "memo",
    version,
    about = "Plan, compare and draw memory-planning problems and memomalloc traces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Output format of commands that print results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// An aligned table for people.
    Text,
    /// JSON for programs.
    Json,
    /// The problem with an `offset` column (`plan` only).
    Csv,
}

#[derive(Subcommand)]
enum Command {
    /// Plan one problem with one strategy.
    Plan {
        /// CSV or JSON problem, or a memomalloc trace.
        input: PathBuf,
        /// Strategy name (default: `best` for offsets, `greedy-by-size-improved` with --shared).
        #[arg(long, short)]
        strategy: Option<String>,
        /// Use the shared-objects family instead of offsets.
        #[arg(long)]
        shared: bool,
        /// With `--strategy exact`: decide whether the problem fits in N bytes (a plan of
        /// height at most N, or a proof that none exists) instead of minimising.
        #[arg(long, value_name = "N")]
        capacity: Option<u64>,
        /// With `--strategy exact`: stop searching after this many seconds (a safety net
        /// on top of the node budget; the answer may then depend on the machine).
        #[arg(long, value_name = "SECS")]
        time_limit: Option<f64>,
        #[arg(long, short, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write the output here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Run every strategy of both families and compare them with the lower bounds.
    Compare {
        /// CSV or JSON problem, or a memomalloc trace.
        input: PathBuf,
        #[arg(long, short, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write the output here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Draw a plan as an SVG heap map (time across, address up).
    Heapmap {
        /// CSV or JSON problem, or a memomalloc trace.
        input: PathBuf,
        /// Strategy name (default: `best`, or `greedy-by-size-improved` with --shared).
        #[arg(long, short)]
        strategy: Option<String>,
        /// Draw a shared-objects plan (objects laid out end to end).
        #[arg(long)]
        shared: bool,
        /// The SVG file to write.
        #[arg(long, short)]
        output: PathBuf,
        /// Picture width in pixels.
        #[arg(long, default_value_t = 1200)]
        width: u32,
        /// Picture height in pixels.
        #[arg(long, default_value_t = 720)]
        height: u32,
    },
    /// Report what a recorded pass allocates: sizes, lifetimes, ops, fates, peak vs plan.
    Stats {
        /// A memomalloc trace (`MEMO_TRACE_DIR/<key>.<n>.trace.json`).
        trace: PathBuf,
        #[arg(long, short, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write the output here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Export a recorded pass for the DHAT viewer, Perfetto, or other planners.
    #[command(group(
        clap::ArgGroup::new("outputs").required(true).multiple(true)
            .args(["dhat", "perfetto", "csv"])
    ))]
    Export {
        /// A memomalloc trace (`MEMO_TRACE_DIR/<key>.<n>.trace.json`).
        trace: PathBuf,
        /// Write a DHAT JSON file (open it in valgrind's dh_view.html).
        #[arg(long, value_name = "OUT.json")]
        dhat: Option<PathBuf>,
        /// Write a Chrome trace-event JSON file (open it in ui.perfetto.dev).
        #[arg(long, value_name = "OUT.json")]
        perfetto: Option<PathBuf>,
        /// Write the pass as a planner problem (minimalloc CSV convention).
        #[arg(long, value_name = "OUT.csv")]
        csv: Option<PathBuf>,
        /// Instant events in the Perfetto file for this many of the largest allocations.
        #[arg(long, default_value_t = memomalloc::study::perfetto::LARGEST)]
        largest: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan {
            input,
            strategy,
            shared,
            capacity,
            time_limit,
            format,
            output,
        } => plan_cmd::plan(
            &input,
            strategy.as_deref(),
            shared,
            planning::ExactFlags {
                capacity,
                time_limit,
            },
            format,
            output.as_deref(),
        ),
        Command::Compare {
            input,
            format,
            output,
        } => compare_cmd::compare(&input, format, output.as_deref()),
        Command::Heapmap {
            input,
            strategy,
            shared,
            output,
            width,
            height,
        } => heapmap_cmd::heapmap(&input, strategy.as_deref(), shared, &output, width, height),
        Command::Stats {
            trace,
            format,
            output,
        } => stats_cmd::stats(&trace, format, output.as_deref()),
        Command::Export {
            trace,
            dhat,
            perfetto,
            csv,
            largest,
        } => export_cmd::export(
            &trace,
            dhat.as_deref(),
            perfetto.as_deref(),
            csv.as_deref(),
            largest,
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memo: {e}");
            ExitCode::from(2)
        }
    }
}
