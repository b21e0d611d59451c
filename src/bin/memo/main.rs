//! `memo`: plan, compare and draw allocation problems and recorded traces.
//!
//! ```text
//! memo plan    INPUT [--strategy NAME] [--shared] [--format text|json|csv] [-o OUT]
//! memo compare INPUT [--format text|json] [-o OUT]
//! memo heapmap INPUT [--strategy NAME] [--shared] -o OUT.svg
//! ```
//!
//! INPUT is a CSV problem (minimalloc convention), a JSON problem, or a trace written by
//! memo-alloc (`MEMO_TRACE_DIR`).

mod commands;
mod input;
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan {
            input,
            strategy,
            shared,
            format,
            output,
        } => commands::plan(
            &input,
            strategy.as_deref(),
            shared,
            format,
            output.as_deref(),
        ),
        Command::Compare {
            input,
            format,
            output,
        } => commands::compare(&input, format, output.as_deref()),
        Command::Heapmap {
            input,
            strategy,
            shared,
            output,
            width,
            height,
        } => commands::heapmap(&input, strategy.as_deref(), shared, &output, width, height),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memo: {e}");
            ExitCode::from(2)
        }
    }
}
