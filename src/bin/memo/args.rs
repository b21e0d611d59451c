//! The `memo` command line: its subcommands, their flags, and the values they accept.
//!
//! What clap can check is checked while parsing, before any command reads its input: the
//! strategy names, the formats each subcommand writes, the seconds of `--time-limit`.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Parser, Subcommand, ValueEnum};
use memo_planner::{OffsetStrategy, SharedObjectStrategy};

/// The exit status of every subcommand, for `--help`.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success
  1  the command ran and its result is a failure: a strategy made an invalid plan, or
     `plan --capacity` found no plan of that height (infeasible, or unknown within the
     budget); the result is still printed in text and JSON
  2  usage error or bad file: an unknown flag or value, flags that do not go together, an
     input that cannot be read or is malformed (CSV or JSON problem, or trace), an output
     that cannot be written; nothing is printed on standard output";

/// The command line.
#[derive(Parser)]
#[command(
    name = "memo",
    version,
    about = "Plan memory-planning problems and study memomalloc traces: plan, compare, \
             heapmap (draw a plan), stats (study a trace), export (DHAT, Perfetto, CSV, \
             folded stacks, flame graph, pprof), diff (compare two traces)",
    after_help = EXIT_STATUS_HELP
)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Output format of `memo plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// An aligned table for people.
    Text,
    /// JSON for programs.
    Json,
    /// The problem with an `offset` column.
    Csv,
}

/// Output format of `memo compare`, `memo stats` and `memo diff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// An aligned table for people.
    Text,
    /// JSON for programs.
    Json,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Plan one problem with one strategy.
    #[command(after_help = EXIT_STATUS_HELP)]
    Plan {
        /// CSV or JSON problem, or a memomalloc trace.
        input: PathBuf,
        /// Strategy (default: `best`, or `greedy-by-size-improved` with --shared).
        #[arg(long, short, value_name = "NAME", value_parser = strategy_names())]
        strategy: Option<String>,
        /// Use the shared-objects family instead of offsets.
        #[arg(long)]
        shared: bool,
        /// With `--strategy exact`: decide whether the problem fits in N bytes (a plan of
        /// height at most N, or a proof that none exists) instead of minimising. Exits
        /// with 1 when no plan of that height is found.
        #[arg(long, value_name = "N")]
        capacity: Option<u64>,
        /// With `--strategy exact`: stop searching after this many seconds (a safety net
        /// on top of the node budget; the answer may then depend on the machine).
        #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
        time_limit: Option<Duration>,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = PlanFormat::Text)]
        format: PlanFormat,
        /// Write the output here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Run every strategy of both families and compare them with the lower bounds.
    #[command(after_help = EXIT_STATUS_HELP)]
    Compare {
        /// CSV or JSON problem, or a memomalloc trace.
        input: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Write the output here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Draw a plan as an SVG heap map (time across, address up).
    #[command(after_help = EXIT_STATUS_HELP)]
    Heapmap {
        /// CSV or JSON problem, or a memomalloc trace.
        input: PathBuf,
        /// Strategy (default: `best`, or `greedy-by-size-improved` with --shared).
        #[arg(long, short, value_name = "NAME", value_parser = strategy_names())]
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
    #[command(after_help = EXIT_STATUS_HELP)]
    Stats {
        /// A memomalloc trace (`MEMO_TRACE_DIR/<key>.<n>.trace.json`).
        trace: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Write the output here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Compare two traces (pass traces or whole-program profiles) by op and by call site:
    /// allocations, bytes and bytes live at the peak, the largest change first.
    #[command(after_help = EXIT_STATUS_HELP)]
    Diff {
        /// The first (baseline) trace.
        a: PathBuf,
        /// The second trace, compared with the first.
        b: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Write the output here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Export a trace for the DHAT viewer, Perfetto, pprof, flame graph tools or planners.
    #[command(
        after_help = EXIT_STATUS_HELP,
        group(
            clap::ArgGroup::new("outputs").required(true).multiple(true)
                .args(["dhat", "perfetto", "csv", "folded", "flamegraph", "pprof"])
        )
    )]
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
        /// Write folded stacks (allocated bytes by stack) for flame graph tools.
        #[arg(long, value_name = "OUT.folded")]
        folded: Option<PathBuf>,
        /// Write a flame graph SVG of the allocated bytes by stack (open it in a browser).
        #[arg(long, value_name = "OUT.svg")]
        flamegraph: Option<PathBuf>,
        /// Write a heap profile in pprof's format (gzipped protobuf: allocated and peak
        /// live objects and bytes by stack) for `go tool pprof`, pprof.me or speedscope.
        #[arg(long, value_name = "OUT.pb.gz")]
        pprof: Option<PathBuf>,
        /// Instant events in the Perfetto file for this many of the largest allocations.
        #[arg(long, default_value_t = memomalloc::study::perfetto::LARGEST)]
        largest: usize,
    },
}

/// Every strategy name of both families, offsets first, each with the families it
/// belongs to (`--shared` picks the family).
fn strategy_names() -> PossibleValuesParser {
    let offsets = OffsetStrategy::ALL.map(OffsetStrategy::name);
    let shared = SharedObjectStrategy::ALL.map(SharedObjectStrategy::name);
    let mut names: Vec<&'static str> = offsets.to_vec();
    names.extend(shared.iter().filter(|s| !offsets.contains(s)));
    PossibleValuesParser::new(names.into_iter().map(|name| {
        let help = match (offsets.contains(&name), shared.contains(&name)) {
            (true, true) => "offsets, and shared objects with --shared",
            (true, false) => "offsets only",
            _ => "shared objects only (with --shared)",
        };
        PossibleValue::new(name).help(help)
    }))
}

/// A number of seconds: finite, not negative.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{text:?} is not a number of seconds"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn strategy_names_are_each_family_once() {
        for cmd in ["plan", "heapmap"] {
            let names: Vec<String> = Cli::command()
                .find_subcommand(cmd)
                .and_then(|c| {
                    c.get_arguments()
                        .find(|a| a.get_id() == "strategy")
                        .cloned()
                })
                .expect("--strategy")
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect();
            let once = |name: &str| names.iter().filter(|n| *n == name).count() == 1;
            for s in OffsetStrategy::ALL {
                assert!(once(s.name()), "{cmd}: {s}");
            }
            for s in SharedObjectStrategy::ALL {
                assert!(once(s.name()), "{cmd}: {s}");
            }
            assert_eq!(names.len(), 9, "{cmd}: {names:?}");
        }
    }

    #[test]
    fn seconds_are_finite_and_not_negative() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        for bad in ["-1", "nan", "inf", "x", ""] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}
