//! `memo`: plan, compare and draw allocation problems, and study memomalloc traces.
//!
//! ```text
//! memo plan    INPUT [--strategy NAME] [--shared] [--capacity N] [--time-limit SECS]
//!              [--format text|json|csv] [-o OUT]
//! memo compare INPUT [--format text|json] [-o OUT]
//! memo heapmap INPUT [--strategy NAME] [--shared] -o OUT.svg
//! memo stats   TRACE [--format text|json] [-o OUT]
//! memo export  TRACE [--dhat OUT.json] [--perfetto OUT.json] [--csv OUT.csv]
//!              [--folded OUT.folded] [--flamegraph OUT.svg] [--pprof OUT.pb.gz]
//! memo diff    A B [--format text|json] [-o OUT]
//! ```
//!
//! INPUT is a CSV problem (minimalloc convention), a JSON problem, or a trace written by
//! memo-alloc (`MEMO_TRACE_DIR`). `--strategy` takes the offset strategies' names, or with
//! `--shared` the shared-objects strategies' names (`memo plan --help` lists both).
//!
//! Exit status, the same for every output format (`failure.rs` says why):
//! - 0: success;
//! - 1: the command ran and its result is a failure: a strategy made an invalid plan, or
//!   `plan --capacity` found no plan of that height (the text or JSON result is printed);
//! - 2: a usage error (clap's, or flags that do not go together) or a file that cannot be
//!   used: an input that cannot be read or is malformed, an output that cannot be written.
//!   Every check of the command line comes before any input is read or planned.

mod args;
mod compare_cmd;
mod diff_cmd;
mod export_cmd;
mod failure;
mod groups_text;
mod heapmap_cmd;
mod input;
mod output;
mod plan_cmd;
mod planning;
mod stats_cmd;
mod table;

use std::process::ExitCode;

use clap::Parser;
use memo_planner::OffsetStrategy;

use args::{Cli, Command};
use failure::Failure;
use planning::{ExactFlags, Strategy};

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

/// Runs one subcommand, once its flags are known to go together.
fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Plan {
            input,
            strategy,
            shared,
            capacity,
            time_limit,
            format,
            output,
        } => {
            let strategy = choose("plan", strategy.as_deref(), shared)?;
            let flags = ExactFlags {
                capacity,
                time_limit,
            };
            if flags.any() && strategy != Strategy::Offsets(OffsetStrategy::Exact) {
                return Err(Failure::Usage {
                    subcommand: "plan",
                    message: "--capacity and --time-limit apply to --strategy exact only".into(),
                });
            }
            plan_cmd::plan(&input, strategy, flags, format, output.as_deref())
        }
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
        } => {
            let strategy = choose("heapmap", strategy.as_deref(), shared)?;
            heapmap_cmd::heapmap(&input, strategy, &output, width, height)
        }
        Command::Stats {
            trace,
            format,
            output,
        } => stats_cmd::stats(&trace, format, output.as_deref()),
        Command::Diff {
            a,
            b,
            format,
            output,
        } => diff_cmd::diff_cmd(&a, &b, format, output.as_deref()),
        Command::Export {
            trace,
            dhat,
            perfetto,
            csv,
            folded,
            flamegraph,
            pprof,
            largest,
        } => export_cmd::export(
            &trace,
            export_cmd::Outputs {
                dhat: dhat.as_deref(),
                perfetto: perfetto.as_deref(),
                csv: csv.as_deref(),
                folded: folded.as_deref(),
                flamegraph: flamegraph.as_deref(),
                pprof: pprof.as_deref(),
            },
            largest,
        ),
    }
}

/// The strategy `--strategy NAME` names in the family `--shared` picks; a name of the
/// other family is a usage error.
fn choose(subcommand: &'static str, name: Option<&str>, shared: bool) -> Result<Strategy, Failure> {
    Strategy::choose(name, shared).map_err(|e| Failure::Usage {
        subcommand,
        message: format!(
            "{:?} is not {} strategy; expected one of: {}",
            e.name,
            if shared {
                "a shared-objects (--shared)"
            } else {
                "an offsets"
            },
            e.known.join(", ")
        ),
    })
}
